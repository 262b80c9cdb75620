package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// typeMismatch matches the error BurntSushi/toml returns when a value's
// TOML type does not fit the setting: `toml: line 1 (last key
// "partitions"): incompatible types: TOML value has type string;
// destination has type slice`.
var typeMismatch = regexp.MustCompile(`\(last key "([^"]+)"\): incompatible types: TOML value has type (\S+); destination has type (\S+)`)

// typeExamples shows, by the destination type the TOML decoder names, how
// a value of that type is written.
var typeExamples = map[string]string{
	"slice":   `a list in brackets, e.g. %s = ["a", "b"]`,
	"float":   "a number without quotes, e.g. %s = 3.1",
	"integer": "a whole number without quotes, e.g. %s = 4",
	"boolean": "true or false without quotes, e.g. %s = true",
	"string":  `a quoted string, e.g. %s = "value"`,
}

// tomlWords names the decoder's Go types for a value as TOML calls them.
var tomlWords = map[string]string{
	"int64": "integer", "float64": "float", "bool": "boolean", "string": "string",
	"[]interface {}": "array", "[]any": "array", "map[string]interface {}": "table", "map[string]any": "table",
	"time.Time": "datetime", "toml.LocalDate": "date", "toml.LocalTime": "time", "toml.LocalDatetime": "datetime",
}

// explainTypeMismatch turns the decoder's type mismatch into a
// *FieldError naming the key, the type written and how the setting is
// written instead; other errors are returned as they are. A setting that
// is a list (partitions = [1, 2]: the decoder names the element's type)
// is shown as a list.
func explainTypeMismatch(err error) error {
	m := typeMismatch.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	key, got, want := m[1], m[2], m[3]
	if isList(key) {
		want = "slice"
	}
	example, ok := typeExamples[want]
	if !ok {
		return err
	}
	if w, ok := tomlWords[got]; ok {
		got = w
	}
	name := key[strings.LastIndex(key, ".")+1:]
	return &FieldError{Key: key, Value: "(a TOML " + got + ")",
		Fix: fmt.Sprintf("the setting is "+example+" (%v)", name, err)}
}

// isList reports whether the setting at key ("partitions",
// "admit.off_partitions") is a list in Config.
func isList(key string) bool {
	t := reflect.TypeFor[Config]()
	for _, part := range strings.Split(key, ".") {
		if t.Kind() != reflect.Struct {
			return false
		}
		found := false
		for i := range t.NumField() {
			if t.Field(i).Tag.Get("toml") == part {
				t, found = t.Field(i).Type, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return t.Kind() == reflect.Slice
}
