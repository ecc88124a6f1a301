// Package cmdutil holds what every command is handed: the Factory of lazy
// providers (IO streams, configuration, printer, platform client, logger),
// the typed errors that map to exit codes, and small cobra helpers.
package cmdutil

import (
	"log/slog"
	"sync"

	"github.com/spf13/pflag"

	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/iostreams"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
)

// Factory is a plain struct of lazy providers: nothing is built until a
// command asks, so start-up stays cheap and every provider can be replaced
// by a test double.
type Factory struct {
	IOStreams *iostreams.IOStreams

	// Paths locates the config file and default data directory.
	Paths func() (config.Paths, error)
	// Config reads the configuration file.
	Config func() (*config.File, error)
	// Settings resolves flags, environment, profile and defaults.
	Settings func() (*config.Settings, error)
	// Printer writes command results in the selected output format.
	Printer func() (*output.Printer, error)
	// Styles colours text for stderr messages.
	Styles func() output.Styles
	// Platform is the platform of the selected profile.
	Platform func() (platform.Platform, error)
	// Logger writes structured logs to stderr (debug level with -v).
	Logger func() *slog.Logger
}

// Globals holds the global flags, bound by the root command.
type Globals struct {
	Flags   *pflag.FlagSet
	Config  string
	Profile string
	Output  string
	Verbose bool
}

// New returns the production factory for ios and env. The root command
// must bind g's flags before any provider is called.
func New(ios *iostreams.IOStreams, env iostreams.Env, g *Globals) *Factory {
	f := &Factory{IOStreams: ios}

	f.Paths = sync.OnceValues(func() (config.Paths, error) {
		return config.DefaultPaths(env, g.Config)
	})
	f.Config = sync.OnceValues(func() (*config.File, error) {
		p, err := f.Paths()
		if err != nil {
			return nil, err
		}
		f.Logger().Debug("reading config", "file", p.ConfigFile)
		return config.Load(p.ConfigFile)
	})
	f.Settings = sync.OnceValues(func() (*config.Settings, error) {
		p, err := f.Paths()
		if err != nil {
			return nil, err
		}
		file, err := f.Config()
		if err != nil {
			return nil, err
		}
		s, err := config.Resolve(file, g.Flags, p)
		if err != nil {
			return nil, err
		}
		log := f.Logger()
		log.Debug("resolved profile", "profile", s.ProfileName, "from", s.ProfileOrigin, "kind", s.Kind, "config_file", s.ConfigFile)
		for _, v := range s.Values {
			if v.Origin != config.FromDefault {
				log.Debug("resolved setting", "key", v.Key, "value", v.Value, "from", v.Origin)
			}
		}
		return s, nil
	})
	// Output format and colour come only from flags, environment and
	// defaults, so printing never waits on (or fails with) the config file.
	presentation := sync.OnceValues(func() (config.Presentation, error) {
		p, err := config.ResolvePresentation(g.Flags)
		if err == nil && p.NoColor {
			ios.DisableColor()
		}
		return p, err
	})
	f.Printer = sync.OnceValues(func() (*output.Printer, error) {
		pres, err := presentation()
		if err != nil {
			return nil, &UsageError{Err: err}
		}
		format, err := output.ParseFormat(pres.Output)
		if err != nil {
			return nil, &UsageError{Err: err}
		}
		format = output.Resolve(format, ios.IsStdoutTTY())
		f.Logger().Debug("output", "format", format, "stdout_tty", ios.IsStdoutTTY(), "color", ios.ColorEnabled())
		return output.NewPrinter(ios.Out, format, output.NewStyles(ios.Out, ios.ColorEnabled())), nil
	})
	f.Styles = sync.OnceValue(func() output.Styles {
		// An invalid SNAVIO_NO_COLOR is reported by the printer; styling
		// stderr falls back to the terminal and NO_COLOR alone.
		_, _ = presentation()
		return output.NewStyles(ios.ErrOut, ios.IsStderrTTY() && ios.ColorEnabled())
	})
	f.Platform = sync.OnceValues(func() (platform.Platform, error) {
		s, err := f.Settings()
		if err != nil {
			return nil, err
		}
		return platform.New(s, env.LookupEnv)
	})
	f.Logger = sync.OnceValue(func() *slog.Logger {
		level := slog.LevelWarn
		if g.Verbose {
			level = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(ios.ErrOut, &slog.HandlerOptions{Level: level}))
	})
	return f
}
