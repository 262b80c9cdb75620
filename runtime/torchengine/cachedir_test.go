package torchengine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPackageRootUsesOnlyADirectoryOfThisUser(t *testing.T) {
	uid := os.Getuid()
	type dirs struct{ tmp, private string }
	mkdir := func(t *testing.T, path string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name  string
		bases func(t *testing.T, d dirs) []string
		want  func(d dirs) string // "" : an error
		root  bool                // needs root (chown)
	}{
		{"the user's own cache directory is used",
			func(t *testing.T, d dirs) []string { return []string{mkdir(t, filepath.Join(d.tmp, "cache"), 0o755)} },
			func(d dirs) string { return filepath.Join(d.tmp, "cache", "easyscale", "python") }, false},
		{"a missing cache directory in the user's home is created",
			func(t *testing.T, d dirs) []string {
				return []string{filepath.Join(mkdir(t, filepath.Join(d.tmp, "home"), 0o755), ".cache")}
			},
			func(d dirs) string { return filepath.Join(d.tmp, "home", ".cache", "easyscale", "python") }, false},
		{"a cache directory that cannot be made is passed over for the next",
			func(t *testing.T, d dirs) []string {
				file := filepath.Join(d.tmp, "file")
				if err := os.WriteFile(file, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{filepath.Join(file, ".cache"), mkdir(t, filepath.Join(d.tmp, "next"), 0o700)}
			},
			func(d dirs) string { return filepath.Join(d.tmp, "next", "easyscale", "python") }, false},
		{"a cache directory others may write is passed over for the private one",
			func(t *testing.T, d dirs) []string { return []string{mkdir(t, filepath.Join(d.tmp, "shared"), 0o777)} },
			func(d dirs) string { return filepath.Join(d.private, "python") }, false},
		{"a cache directory in a home others may write is not created",
			func(t *testing.T, d dirs) []string {
				return []string{filepath.Join(mkdir(t, filepath.Join(d.tmp, "shared"), 0o777), ".cache")}
			},
			func(d dirs) string { return filepath.Join(d.private, "python") }, false},
		{"a package directory others may write is passed over",
			func(t *testing.T, d dirs) []string {
				base := mkdir(t, filepath.Join(d.tmp, "cache"), 0o755)
				mkdir(t, filepath.Join(base, "easyscale", "python"), 0o777)
				return []string{base}
			},
			func(d dirs) string { return filepath.Join(d.private, "python") }, false},
		{"another user's cache directory is passed over for the private one",
			func(t *testing.T, d dirs) []string {
				base := mkdir(t, filepath.Join(d.tmp, "root-cache"), 0o755)
				if err := os.Chown(base, 65534, 65534); err != nil {
					t.Fatal(err)
				}
				return []string{base}
			},
			func(d dirs) string { return filepath.Join(d.private, "python") }, true},
		{"another user's private directory is refused: nothing is left",
			func(t *testing.T, d dirs) []string {
				if err := os.Mkdir(d.private, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(d.private, 65534, 65534); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			func(d dirs) string { return "" }, true},
		{"a private directory others may write is refused: nothing is left",
			func(t *testing.T, d dirs) []string {
				mkdir(t, d.private, 0o777)
				return []string{mkdir(t, filepath.Join(d.tmp, "shared"), 0o777)}
			},
			func(d dirs) string { return "" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && uid != 0 {
				t.Skip("needs root to make a directory of another user")
			}
			tmp := t.TempDir()
			d := dirs{tmp: tmp, private: filepath.Join(tmp, "easyscale-private")}
			bases := c.bases(t, d)
			got, err := packageRoot(uid, bases, d.private)
			want := c.want(d)
			if want == "" {
				if err == nil {
					t.Fatalf("packageRoot = %q, want an error", got)
				}
				for _, b := range append(bases, d.private) {
					if !strings.Contains(err.Error(), b) {
						t.Errorf("the error does not name %s: %v", b, err)
					}
				}
				return
			}
			if err != nil || got != want {
				t.Fatalf("packageRoot = %q, %v; want %q", got, err, want)
			}
			if err := ownDir(got, uid); err != nil {
				t.Errorf("the chosen directory: %v", err)
			}
			if _, err := Extract(got); err != nil {
				t.Errorf("extracting into the chosen directory: %v", err)
			}
		})
	}
}

// An extra job that easyscale-backfilld (root) submits for a user with
// sbatch --uid runs with the daemon's HOME: the package must not go into
// (or be imported from) a home this user does not own alone.
func TestDefaultPackageRootPassesOverAHomeOthersMayWrite(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("TMPDIR", t.TempDir())
	root, err := defaultPackageRoot()
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(root, home) {
		t.Fatalf("defaultPackageRoot() = %s, inside HOME %s, which others may write", root, home)
	}
	if err := ownDir(root, os.Getuid()); err != nil {
		t.Fatalf("defaultPackageRoot() = %s: %v", root, err)
	}
}
