package plugintest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// buildPlugin builds the plugin with the repository's own rules (make
// spank-plugin, spank/spank.mk) into a temporary directory, so the tests
// check the flags and version script the Makefile applies, not flags of
// their own.
func buildPlugin(t *testing.T) string {
	t.Helper()
	need(t, spankH+" (libslurm-dev)", haveFile(spankH))
	need(t, "cc", haveCC())
	_, err := exec.LookPath("make")
	need(t, "make", err == nil)
	dir := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "-C", "../..", "BIN="+dir, "spank-plugin")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make spank-plugin: %v\n%s", err, out)
	}
	so := filepath.Join(dir, "easyscale_spank.so")
	if _, err := os.Stat(so); err != nil {
		t.Fatalf("make spank-plugin did not write %s: %v", so, err)
	}
	return so
}

func openELF(t *testing.T, path string) *elf.File {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("reading %s as ELF: %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestPluginExportsOnlyTheSpankSymbols(t *testing.T) {
	f := openELF(t, buildPlugin(t))
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatalf("dynamic symbols: %v", err)
	}
	var got []string
	for _, s := range syms {
		bind := elf.ST_BIND(s.Info)
		if s.Section == elf.SHN_UNDEF || (bind != elf.STB_GLOBAL && bind != elf.STB_WEAK) {
			continue
		}
		got = append(got, s.Name)
	}
	sort.Strings(got)
	// What Slurm 22.05's loader reads (src/common/plugin.c: plugin_name,
	// plugin_type, plugin_version), what SPANK_PLUGIN() defines
	// (spank_plugin_version), and the callbacks this plugin implements.
	want := []string{"plugin_name", "plugin_type", "plugin_version", "slurm_spank_init",
		"slurm_spank_init_post_opt", "slurm_spank_task_init", "spank_plugin_version"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("exported %v, want %v", got, want)
	}
}

// dynFlags returns the DT_FLAGS and DT_FLAGS_1 values of f (0 when absent).
func dynFlags(t *testing.T, f *elf.File) (flags, flags1 uint64) {
	t.Helper()
	if v, err := f.DynValue(elf.DT_FLAGS); err == nil && len(v) > 0 {
		flags = v[0]
	}
	if v, err := f.DynValue(elf.DT_FLAGS_1); err == nil && len(v) > 0 {
		flags1 = v[0]
	}
	return flags, flags1
}

func imports(t *testing.T, f *elf.File) map[string]bool {
	t.Helper()
	syms, err := f.ImportedSymbols()
	if err != nil {
		t.Fatalf("imported symbols: %v", err)
	}
	m := map[string]bool{}
	for _, s := range syms {
		m[s.Name] = true
	}
	return m
}

func segment(f *elf.File, typ elf.ProgType) *elf.Prog {
	for _, p := range f.Progs {
		if p.Type == typ {
			return p
		}
	}
	return nil
}

func TestBuiltPluginIsHardened(t *testing.T) {
	f := openELF(t, buildPlugin(t))
	flags, flags1 := dynFlags(t, f)
	imp := imports(t, f)
	fortified := false
	for name := range imp {
		if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "_chk") && name != "__stack_chk_fail" {
			fortified = true
		}
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"it is a shared object (ET_DYN) built from position-independent code (no DT_TEXTREL)",
			f.Type == elf.ET_DYN && flags&uint64(elf.DF_TEXTREL) == 0},
		{"relocations are read-only after loading (a GNU_RELRO segment: -z relro)",
			segment(f, elf.PT_GNU_RELRO) != nil},
		{"every symbol is bound at load time (DF_BIND_NOW and DF_1_NOW: -z now)",
			flags&uint64(elf.DF_BIND_NOW) != 0 && flags1&uint64(elf.DF_1_NOW) != 0},
		{"functions with buffers carry stack canaries (imports __stack_chk_fail: -fstack-protector-strong)",
			imp["__stack_chk_fail"]},
		{"string and memory calls are checked (imports a __*_chk function: -D_FORTIFY_SOURCE=2 -O2)",
			fortified},
		{"the stack is not executable (GNU_STACK without PF_X)",
			segment(f, elf.PT_GNU_STACK) != nil && segment(f, elf.PT_GNU_STACK).Flags&elf.PF_X == 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("not so: DT_FLAGS=%#x DT_FLAGS_1=%#x imports=%v", flags, flags1, keys(imp))
			}
		})
	}
}

func keys(m map[string]bool) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
