package config

import (
	"fmt"
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
	"map":     "a table, e.g. [%s]",
}

// explainTypeMismatch turns the decoder's type mismatch into a
// *FieldError naming the key, the type written and how the setting is
// written instead; other errors are returned as they are.
func explainTypeMismatch(err error) error {
	m := typeMismatch.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	key, got, want := m[1], m[2], m[3]
	example, ok := typeExamples[want]
	if !ok {
		return err
	}
	name := key[strings.LastIndex(key, ".")+1:]
	return &FieldError{Key: key, Value: "(a TOML " + got + ")",
		Fix: fmt.Sprintf("the setting is "+example+" (%v)", name, err)}
}
