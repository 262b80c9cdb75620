// Package install tests `make install`: built into a temporary BIN and
// installed under a temporary DESTDIR, it must lay out exactly the files an
// admin expects under PREFIX, with their modes, and the files that name
// installed paths (the systemd unit, the example plugstack.conf line) must
// name them under PREFIX without DESTDIR.
package install

import (
	"debug/buildinfo"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
)

// installed runs make install with prefix and the data tree datasrc into a
// new DESTDIR and returns it and the files under it as "MODE /PATH" lines,
// sorted.
func installed(t *testing.T, bin, prefix, datasrc string) (string, []string) {
	t.Helper()
	if _, err := os.Stat("/usr/include/slurm/spank.h"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("spank.h (libslurm-dev) missing under CI")
		}
		t.Skip("make install builds the SPANK plugin: spank.h (libslurm-dev) missing")
	}
	dest := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "-C", "../..", "install",
		"BIN="+bin, "DESTDIR="+dest, "PREFIX="+prefix, "DATASRC="+datasrc)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install PREFIX=%s: %v\n%s", prefix, err, out)
	}
	var files []string
	err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, fi.Mode().String()+" "+strings.TrimPrefix(p, dest))
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dest, err)
	}
	sort.Strings(files)
	return dest, files
}

func TestMakeInstallLaysOutEveryFileUnderPrefixAndDestdir(t *testing.T) {
	bin := t.TempDir()     // one build for every case
	fetched := fakeData(t) // what make data leaves in data/
	tests := []struct {
		name   string
		prefix string
		data   bool // DATASRC holds the data sets
	}{
		{"the default prefix of a hand install, with the data sets", "/usr/local", true},
		{"a distribution package's prefix, without data sets", "/usr", false},
		{"a prefix of its own, with the data sets", "/opt/easyscale", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			datasrc := t.TempDir()
			if tc.data {
				datasrc = fetched
			}
			dest, files := installed(t, bin, tc.prefix, datasrc)
			p := tc.prefix
			want := []string{
				"-rw-r--r-- " + p + "/lib/systemd/system/easyscale-backfilld.service",
				"-rw-r--r-- " + p + "/share/easyscale/backfill.toml",
				"-rw-r--r-- " + p + "/share/easyscale/gres.conf.fragment",
				"-rw-r--r-- " + p + "/share/easyscale/plugstack.conf",
				"-rw-r--r-- " + p + "/share/easyscale/slurm.conf.fragment",
				"-rw-r--r-- " + p + "/share/man/man8/easyscale-spank.8",
				"-rwxr-xr-x " + p + "/bin/easyscale",
				"-rwxr-xr-x " + p + "/bin/easyscale-backfilld",
				"-rwxr-xr-x " + p + "/bin/easyscale-plot",
				"-rwxr-xr-x " + p + "/bin/easyscale-sbatch",
				"-rwxr-xr-x " + p + "/bin/easyscale-simulate",
				"-rwxr-xr-x " + p + "/lib/slurm/easyscale_spank.so",
				"-rwxr-xr-x " + p + "/libexec/easyscale/easyscale-gpuctx",
			}
			if tc.data {
				for _, f := range dataFiles {
					want = append(want, "-rw-r--r-- "+p+"/share/easyscale/data/"+f)
				}
			}
			sort.Strings(want)
			if strings.Join(files, "\n") != strings.Join(want, "\n") {
				t.Errorf("installed:\n%s\nwant:\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
			}
			read := func(rel string) string {
				b, err := os.ReadFile(filepath.Join(dest, p, rel))
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			unit := read("lib/systemd/system/easyscale-backfilld.service")
			if !strings.Contains(unit, "\nExecStart="+p+"/bin/easyscale-backfilld --config /etc/easyscale/backfill.toml\n") {
				t.Errorf("unit's ExecStart does not name %s/bin/easyscale-backfilld:\n%s", p, unit)
			}
			plug := read("share/easyscale/plugstack.conf")
			line := "\nrequired " + p + "/lib/slurm/easyscale_spank.so helper=" + p + "/libexec/easyscale/easyscale-gpuctx\n"
			if !strings.Contains(plug, line) {
				t.Errorf("example plugstack.conf lacks %q:\n%s", line, plug)
			}
			for name, text := range map[string]string{"unit": unit, "plugstack.conf": plug} {
				if strings.Contains(text, dest) {
					t.Errorf("%s names the DESTDIR %s", name, dest)
				}
			}
			info, err := buildinfo.ReadFile(filepath.Join(dest, p, "bin/easyscale"))
			if err != nil {
				t.Fatalf("installed easyscale: %v", err)
			}
			stamp := "runtime/datasets.InstallDir=" + p + "/share/easyscale/data"
			if !slices.ContainsFunc(info.Settings, func(s debug.BuildSetting) bool {
				return s.Key == "-ldflags" && strings.Contains(s.Value, stamp)
			}) {
				t.Errorf("installed easyscale was not linked with %s: %v", stamp, info.Settings)
			}
			f, err := elf.Open(filepath.Join(dest, p, "lib/slurm/easyscale_spank.so"))
			if err != nil {
				t.Fatalf("installed plugin: %v", err)
			}
			defer f.Close()
			if f.Type != elf.ET_DYN {
				t.Errorf("installed plugin is ELF type %v, want a shared object", f.Type)
			}
		})
	}
}

// dataFiles are the data sets' files below DATASRC, as make data writes them.
var dataFiles = []string{
	"mnist/train-images-idx3-ubyte.gz", "mnist/train-labels-idx1-ubyte.gz",
	"mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz",
	"charlm/Isaac.Newton-Opticks.txt",
}

// fakeData writes dataFiles (placeholder bytes: make install only copies
// them) into a new directory and returns it.
func fakeData(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range dataFiles {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("placeholder"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
