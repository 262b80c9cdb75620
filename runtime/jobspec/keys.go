package jobspec

import (
	"reflect"
	"slices"
	"strings"

	"github.com/easyscale/easyscale-slurm/internal/spelling"
)

// knownKeys are the keys a job file may set, dotted by table
// ("torch.module", "optimizer.lr"), read from Spec's toml tags; a map
// (speeds, torch.params) takes keys of the user's own.
var knownKeys = func() []string {
	var keys []string
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
			if ft.Kind() == reflect.Struct {
				walk(ft, prefix+name+".")
				continue
			}
			keys = append(keys, prefix+name)
		}
	}
	walk(reflect.TypeFor[Spec](), "")
	slices.Sort(keys)
	return keys
}()

// didYouMean is " (did you mean K?)" for an unknown key written as key
// (dotted) when a known key K is within two edits of it and fewer than
// half the length of key's last part, the closest first; "" when none is
// ("optimizer.bar" is not taken for "optimizer.lr").
func didYouMean(key string) string {
	last := key[strings.LastIndex(key, ".")+1:]
	best, bestD := "", 3
	for _, k := range knownKeys {
		if d := spelling.Distance(k, key); d < bestD && 2*d < len([]rune(last)) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}
