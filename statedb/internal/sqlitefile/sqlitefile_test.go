package sqlitefile

import (
	"errors"
	"strings"
	"testing"
)

func TestNetworkFilesystemsAreRefused(t *testing.T) {
	cases := []struct {
		name    string
		magic   int64
		refused string
	}{
		{"NFS is refused", 0x6969, "nfs"},
		{"Lustre is refused", 0x0bd00bd0, "lustre"},
		{"GPFS is refused", 0x47504653, "gpfs"},
		{"CIFS is refused", 0xff534d42, "cifs"},
		{"ext4 is accepted", 0xef53, ""},
		{"tmpfs is accepted", 0x01021994, ""},
		{"FUSE is accepted because it is often local", 0x65735546, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckLocalFS("/state", func(string) (int64, error) { return c.magic, nil })
			var ne *NetworkFSError
			if c.refused == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if !errors.As(err, &ne) || ne.FS != c.refused || !errors.Is(err, ErrNetworkFS) {
				t.Fatalf("err = %v, want NetworkFSError for %s", err, c.refused)
			}
			if !strings.Contains(err.Error(), "local") || !strings.Contains(err.Error(), "AllowNetworkFS") {
				t.Errorf("message %q does not name the local-directory option and the override", err)
			}
		})
	}
	t.Run("a failing statfs is reported", func(t *testing.T) {
		boom := errors.New("boom")
		if err := CheckLocalFS("/x", func(string) (int64, error) { return 0, boom }); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the test directory's real filesystem is local", func(t *testing.T) {
		if err := CheckLocalFS(t.TempDir(), StatfsType); err != nil {
			t.Skipf("TMPDIR is on a network filesystem: %v", err)
		}
	})
}

func TestParseProcLocks(t *testing.T) {
	cases := []struct {
		name string
		text string
		want int
	}{
		{"the flock on the file is found", "1: POSIX  ADVISORY  WRITE 7 fe:00:42 0 EOF\n2: FLOCK  ADVISORY  WRITE 1234 fe:00:42 0 EOF\n", 1234},
		{"hex device numbers are compared as numbers", "3: FLOCK  ADVISORY  WRITE 99 0fe:0:42 0 EOF\n", 99},
		{"a lock on another inode is not the holder", "1: FLOCK  ADVISORY  WRITE 1234 fe:00:43 0 EOF\n", 0},
		{"a lock on another device is not the holder", "1: FLOCK  ADVISORY  WRITE 1234 fd:00:42 0 EOF\n", 0},
		{"a waiter is not the holder", "1: -> FLOCK  ADVISORY  WRITE 555 fe:00:42 0 EOF\n", 0},
		{"a POSIX lock is not a flock", "1: POSIX  ADVISORY  WRITE 1234 fe:00:42 0 EOF\n", 0},
		{"malformed lines are skipped", "garbage\n1: FLOCK ADVISORY WRITE x fe:00:42 0 EOF\n1: FLOCK ADVISORY WRITE 5 fe:42 0 EOF\n", 0},
		{"a holder outside the PID namespace (pid 0) is not named", "1: FLOCK  ADVISORY  WRITE 0 fe:00:42 0 EOF\n", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ParseProcLocks(strings.NewReader(c.text), 0xfe, 0, 42); got != c.want {
				t.Fatalf("ParseProcLocks = %d, want %d", got, c.want)
			}
		})
	}
}
