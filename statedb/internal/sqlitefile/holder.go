package sqlitefile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Holder names the process holding the flock on locked: the PID
// /proc/locks lists for it (on this host), else the "pid=<pid> host=<host>"
// of lockFile; pid 0 when neither says.
func Holder(locked, lockFile string) (pid int, host string) {
	if f, err := os.Open(lockFile); err == nil {
		pid, host = ReadHolder(f)
		f.Close()
	}
	if p := FlockHolder(locked); p > 0 && p != pid {
		host, _ = os.Hostname()
		pid = p
	}
	return pid, host
}

// FlockHolder returns the PID that /proc/locks lists as holding a flock on
// path, or 0 when none is listed (no procfs, or the holder is outside this
// PID namespace).
func FlockHolder(path string) int {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	return ParseProcLocks(f, unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
}

// ParseProcLocks finds the holder of a FLOCK on the file (major:minor:ino)
// in the /proc/locks format of proc(5), e.g.
//
//	1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
//
// where major and minor are hex. Waiters ("1: -> FLOCK ...") and malformed
// lines are skipped; it returns 0 when no line matches.
func ParseProcLocks(r io.Reader, major, minor uint32, ino uint64) int {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(id[0], 16, 32)
		mnr, err2 := strconv.ParseUint(id[1], 16, 32)
		in, err3 := strconv.ParseUint(id[2], 10, 64)
		pid, err4 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		if uint32(maj) == major && uint32(mnr) == minor && in == ino && pid > 0 {
			return pid
		}
	}
	return 0
}

// WriteHolder records "pid=<pid> host=<host>" of this process in f, the
// lock file it holds.
func WriteHolder(f *os.File) error {
	host, _ := os.Hostname()
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(fmt.Sprintf("pid=%d host=%s\n", os.Getpid(), host)), 0)
	return err
}

// ReadHolder parses what WriteHolder wrote; unreadable content gives pid 0
// and host "".
func ReadHolder(f *os.File) (pid int, host string) {
	b, _ := io.ReadAll(io.LimitReader(f, 512))
	for _, field := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "pid":
			fmt.Sscanf(v, "%d", &pid)
		case "host":
			host = v
		}
	}
	return pid, host
}
