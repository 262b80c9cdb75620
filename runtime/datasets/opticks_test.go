package datasets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocateOpticksPrefersTheGOROOTVariable(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, filepath.FromSlash(OpticksRelPath))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("Opticks"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOROOT", root)
	got, err := LocateOpticks()
	if err != nil || got != p {
		t.Fatalf("LocateOpticks = %q, %v; want %q", got, err, p)
	}
}

func TestLocateOpticksPrefersTheCopyMadeByMakeData(t *testing.T) {
	cwd := t.TempDir()
	local := filepath.Join(cwd, filepath.FromSlash(OpticksLocalPath))
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, []byte("Opticks"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	t.Setenv("GOROOT", t.TempDir())
	got, err := LocateOpticks()
	if err != nil || got != filepath.FromSlash(OpticksLocalPath) {
		t.Fatalf("LocateOpticks = %q, %v; want %q", got, err, OpticksLocalPath)
	}
}

func TestLocateOpticksFindsTheInstalledCopyAfterTheLocalOne(t *testing.T) {
	install := t.TempDir()
	p := filepath.Join(install, "charlm", "Isaac.Newton-Opticks.txt")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("Opticks"), 0o644); err != nil {
		t.Fatal(err)
	}
	setInstallDir(t, install)
	t.Chdir(t.TempDir())
	t.Setenv("GOROOT", t.TempDir())
	got, err := LocateOpticks()
	if err != nil || got != p {
		t.Fatalf("LocateOpticks = %q, %v; want the installed %q", got, err, p)
	}
}

func TestLocateOpticksTakesTheDirectoryOfTheEnvironmentFirst(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "Isaac.Newton-Opticks.txt")
	if err := os.WriteFile(p, []byte("Opticks"), 0o644); err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir() // a make data copy too: the variable wins
	local := filepath.Join(cwd, filepath.FromSlash(OpticksLocalPath))
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, []byte("Opticks"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	t.Setenv(CharLMDirEnv, dir)
	if got, err := LocateOpticks(); err != nil || got != p {
		t.Fatalf("LocateOpticks = %q, %v; want %q", got, err, p)
	}
	t.Setenv(CharLMDirEnv, t.TempDir())
	if _, err := LocateOpticks(); err == nil || !strings.Contains(err.Error(), CharLMDirEnv) {
		t.Fatalf("a directory without the text: %v, want an error naming %s", err, CharLMDirEnv)
	}
}
