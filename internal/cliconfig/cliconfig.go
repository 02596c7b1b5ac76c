// Package cliconfig is the configuration plumbing the edgeset daemons
// (edgeset-controller, edgeset-agent) share: a viper that reads a
// command's flags, the EDGESET_ environment and a YAML config file, in that
// order of precedence, decoded with unknown keys refused; and the slog
// logger their log-level and log-format keys describe.
package cliconfig

import (
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EnvPrefix prefixes every key's environment variable: key data-dir is
// EDGESET_DATA_DIR.
const EnvPrefix = "EDGESET"

// ConfigKey is the key (and flag) naming the config file.
const ConfigKey = "config"

// FromFlagsAndEnv is the source Load reports when no config file is set.
const FromFlagsAndEnv = "flags and environment"

// New returns the viper a daemon reads its configuration with: key
// data-dir comes from EDGESET_DATA_DIR (EnvPrefix, dashes as underscores),
// except the keys envNames maps to a variable of their own. A key whose
// default variable means something else to another edgeset command gets
// one: the agent's node token is EDGESET_NODE_TOKEN, since EDGESET_TOKEN is
// edgesetctl's API token, and an agent started from an operator's shell
// must not send that token to the broker as its password.
func New(envNames map[string]string) *viper.Viper {
	return viper.NewWithOptions(viper.EnvKeyReplacer(envKeys(envNames)))
}

// envKeys is New's environment naming: key to variable.
type envKeys map[string]string

// Replace names the variable of one key; viper hands it EnvPrefix, an
// underscore and the key, upper-cased.
func (e envKeys) Replace(s string) string {
	if name, ok := e[strings.ToLower(strings.TrimPrefix(s, EnvPrefix+"_"))]; ok {
		return name
	}
	return strings.ReplaceAll(s, "-", "_")
}

// Bind makes every flag of flags a key of v (a viper from New), read from
// the environment too.
func Bind(v *viper.Viper, flags *pflag.FlagSet) {
	_ = v.BindPFlags(flags)
	v.SetEnvPrefix(EnvPrefix)
	v.AutomaticEnv()
}

// Load reads the YAML config file named by ConfigKey, if set, and decodes
// flags, environment and file into out (a pointer to a struct of
// mapstructure-tagged fields, one per key). A key out has no field for is
// an error naming it. Load returns the source: the config file's path, or
// FromFlagsAndEnv. opts adjust the decoder (StrictDurations).
func Load(v *viper.Viper, out any, opts ...viper.DecoderConfigOption) (string, error) {
	source := FromFlagsAndEnv
	if path := v.GetString(ConfigKey); path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return "", fmt.Errorf("read config file %s: %w", path, err)
		}
		source = path
	}
	if err := v.UnmarshalExact(out, opts...); err != nil {
		return "", fmt.Errorf("config (%s): %w", source, err)
	}
	return source, nil
}

// StrictDurations is the decoder of viper's defaults (durations from
// strings, lists from comma-separated strings) that also refuses a bare
// number where a duration is wanted: YAML's "connect-timeout: 10" would
// otherwise decode as 10 nanoseconds.
var StrictDurations = viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
	durationWithUnit, mapstructure.StringToTimeDurationHookFunc(), mapstructure.StringToSliceHookFunc(",")))

// durationWithUnit refuses a number decoded into a time.Duration.
func durationWithUnit(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() || from == to {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return nil, fmt.Errorf("%v is a number, want a duration with its unit, such as \"10s\" or \"1m\"", data)
	}
	return data, nil
}

// NewLogger logs to w at level, as JSON when format is "json" and as text
// otherwise. The daemons validate format, and parse level, with their own
// messages.
func NewLogger(level slog.Level, format string, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
