package jobspec

import (
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/easyscale/easyscale-slurm/internal/spelling"
)

// knownKeys are the keys a job file may set, dotted by table
// ("torch.module", "optimizer.lr"), read from Spec's toml tags; a map
// (speeds, torch.params) takes keys of the user's own. knownTables are
// the names that hold a table of keys ("optimizer", "torch.params",
// "speeds").
var knownKeys, knownTables = func() (keys, tables []string) {
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := f.Tag.Get("toml")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				tables = append(tables, prefix+name)
				walk(ft, prefix+name+".")
				continue
			case reflect.Map:
				tables = append(tables, prefix+name)
			}
			keys = append(keys, prefix+name)
		}
	}
	walk(reflect.TypeFor[Spec](), "")
	slices.Sort(keys)
	slices.Sort(tables)
	return keys, tables
}()

// notFor are the keys of knownKeys an engine refuses (Parse's checks), so
// never suggested for a job of that engine.
func notFor(engine, key string) bool {
	if engine == EngineTorch {
		return slices.Contains([]string{"task", "epochs", "data.augment_shift", "data.seq_len"}, key) ||
			strings.HasPrefix(key, "model.") || strings.HasPrefix(key, "optimizer.") || strings.HasPrefix(key, "lr_schedule.") ||
			slices.Contains([]string{"model", "optimizer", "lr_schedule"}, key)
	}
	return key == "torch" || strings.HasPrefix(key, "torch.")
}

// closest is the name among names (not refused for engine) within two
// edits of name and fewer than half the length of its last part, the
// closest first and, between equals, the first in order; "" when none is
// ("optimizer.bar" is not taken for "optimizer.lr").
func closest(engine, name string, names []string) string {
	last := name[strings.LastIndex(name, ".")+1:]
	best, bestD := "", 3
	for _, k := range names {
		if notFor(engine, k) {
			continue
		}
		if d := spelling.Distance(k, name); d < bestD && 2*d < len([]rune(last)) {
			best, bestD = k, d
		}
	}
	return best
}

// elsewhere is the known key (not refused for engine) in a table whose
// last part is name's last part or one edit from it: a key put in the
// wrong table ("threads" at the top for torch.threads, "lr" for
// optimizer.lr); "" when none is. A key inside a table is never taken for
// a top-level one ("optimizer.name" is not the job's name).
func elsewhere(engine, name string) string {
	last := name[strings.LastIndex(name, ".")+1:]
	inTable := strings.Contains(name, ".")
	best, bestD := "", 2
	for _, k := range knownKeys {
		if k == name || notFor(engine, k) || inTable && !strings.Contains(k, ".") {
			continue
		}
		if d := spelling.Distance(k[strings.LastIndex(k, ".")+1:], last); d < bestD && 2*d < len([]rune(last)) {
			best, bestD = k, d
		}
	}
	return best
}

// describeUnknown writes the unknown keys of a job file for engine, one
// entry each, sorted: a key close to a known one says which ("torch.thread
// (did you mean torch.threads?)"), and an unknown table ("[optimzer]",
// isTable, even an empty one) stands for all of its keys, with the table
// it likely means (tables compared with tables: "[speed]" means [speeds],
// not seed).
func describeUnknown(engine string, und []toml.Key, isTable func(toml.Key) bool) []string {
	unknown := map[string]bool{}
	for _, k := range und {
		unknown[k.String()] = true
	}
	var out []string
	listed := map[string]bool{} // tables whose keys an entry listed (tableHolds): once each
	slices.SortFunc(und, func(a, b toml.Key) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range und {
		name := k.String()
		if under := underUnknownTable(k, unknown); under {
			continue // its table is listed instead
		}
		if hasSubkeys(name, unknown) || isTable(k) {
			entry := "[" + name + "]"
			if t := closest(engine, name, knownTables); t != "" {
				entry += " (did you mean [" + t + "]?)"
			}
			out = append(out, entry)
			continue
		}
		if t := closest(engine, name, knownKeys); t != "" {
			name += " (did you mean " + t + "?)"
		} else {
			var hints []string
			if held := tableHolds(engine, name); held != "" && !listed[held] {
				listed[held] = true
				hints = append(hints, held)
			}
			if t := elsewhere(engine, name); t != "" {
				hints = append(hints, "did you mean "+t+"?")
			}
			if len(hints) > 0 {
				name += " (" + strings.Join(hints, "; ") + ")"
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// tableHolds says which keys the known table that holds key name takes
// ("[lr_schedule] holds min_lr, warmup_steps"), for a key with no close
// match there: "[lr_schedule] kind" is not a key of that table, and
// optimizer.kind, which [elsewhere] finds, is another thing. "" for a
// top-level key, a table the engine refuses or one that takes keys of the
// user's own (a map: speeds, torch.params).
func tableHolds(engine, name string) string {
	i := strings.LastIndex(name, ".")
	if i < 0 {
		return ""
	}
	table := name[:i]
	if notFor(engine, table) || !slices.Contains(knownTables, table) || slices.Contains(knownKeys, table) {
		return ""
	}
	var held []string
	for _, k := range knownKeys {
		if rest, ok := strings.CutPrefix(k, table+"."); ok && !strings.Contains(rest, ".") && !notFor(engine, k) {
			held = append(held, rest)
		}
	}
	if len(held) == 0 {
		return ""
	}
	return "[" + table + "] holds " + strings.Join(held, ", ")
}

// underUnknownTable reports whether key k sits under a table that is
// itself unknown (listed in unknown).
func underUnknownTable(k toml.Key, unknown map[string]bool) bool {
	for i := 1; i < len(k); i++ {
		if unknown[k[:i].String()] {
			return true
		}
	}
	return false
}

// hasSubkeys reports whether some unknown key sits under name.
func hasSubkeys(name string, unknown map[string]bool) bool {
	for k := range unknown {
		if strings.HasPrefix(k, name+".") {
			return true
		}
	}
	return false
}
