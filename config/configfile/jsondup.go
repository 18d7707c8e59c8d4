package configfile

import (
	"bytes"
	"encoding/json"
	"errors"
)

// checkJSONDuplicates reports keys given twice in one JSON object:
// encoding/json, and so viper, silently keeps the last, where YAML and
// TOML decoders reject the file. data has already decoded without error.
func (l *loader) checkJSONDuplicates(data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := key.(string)
				p := joinPath(path, k)
				if seen[k] {
					l.fail(p, false, errors.New("duplicate key (JSON would keep only the last)"))
				}
				seen[k] = true
				if err := walk(p); err != nil {
					return err
				}
			}
		case json.Delim('['):
			for dec.More() {
				if err := walk(path + "[]"); err != nil {
					return err
				}
			}
		default:
			return nil
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	if err := walk(""); err != nil {
		l.fail("", false, err)
	}
}

// joinPath appends key to a key path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
