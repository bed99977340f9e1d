// Command idforge generates, decodes and explains snowflake IDs, UUIDv7s and
// dated chain numbers.
//
//	$ idforge gen -n 3 -machine 7
//	914779523243864064
//	914779523243864065
//	914779523243864066
//	$ idforge decode 914779523243864066
//	{"id":"914779523243864066","timestamp":"2026-11-21T23:27:14.123Z","machine":7,"sequence":2,"friendly":"20261121232714123-7-2"}
//	$ idforge decode 20261121232714123-7-2
//	{"id":"914779523243864066","timestamp":"2026-11-21T23:27:14.123Z","machine":7,"sequence":2,"friendly":"20261121232714123-7-2"}
//	$ idforge layout -layout jssafe
//	layout          jssafe: 41/3/9 ms since 2019-12-24T16:00:00Z
//	bits            41 timestamp (ms) + 3 machine + 9 sequence = 53
//	IDs per tick    512 (one tick = 1 ms)
//	IDs per second  512000
//	machines        8 (IDs 0 to 7)
//	largest ID      9007199254740991
//	runs out        2089-08-30T07:47:35.552Z
//
// Subcommands:
//
//	gen    [-n N] [-kind k] [-machine M | -store s] [-format f]  print N new IDs, one per line
//	decode [-layout layout] [-format format] ID                  print an ID's time, machine and sequence as JSON
//	layout [-layout layout]                                      print a layout's bit split, capacity and end date
//	schema [-dialect d] [-prefix p]                              print the ID tables' CREATE TABLE statements
//	store  init|machines|release ID|chain NAME|... [-store s]    set up and inspect a store
//	serve  [-addr a] [-store s] [-namespace n] [-layout l] ...    serve IDs over HTTP (see package server)
//	version                                                      print the module version and VCS revision
//	help   [command]                                             print this help or a command's flags
//
// Layouts: default (41/10/12 ms), second (31/10/22 s), jssafe (41/3/9 ms),
// jssafe-second (31/3/19 s); see engine/snowflake. Formats: decimal, radix62,
// radix36 (both zero-padded so they sort like the IDs) and friendly
// (yyyyMMddHHmmssSSS-machine-sequence, UTC). decode reads decimal and friendly
// IDs without -format.
//
// The exit status is 0 on success, 2 for a bad command line (flags, IDFORGE_*
// variables, a configuration the store refuses) or a bad ID, 1 when
// generating, serving or writing fails. gen issues IDs for one machine ID in one
// process: two processes running gen with the same -machine at the same time
// can issue the same IDs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	_ "time/tzdata" // -zone names work where the system has no time zone files (a scratch container)

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/wire"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand. setup defines the command's flags on fs and
// returns the function that runs it with the arguments that are not flags;
// help calls setup alone to print the flags.
type command struct {
	name    string
	args    string // the usage line after the name
	summary string
	setup   func(fs *flag.FlagSet) runFunc
	details string // help prints it after the flags
}

// runFunc runs a command: its output goes to stdout, what it says about
// the run (a warning, the machine ID used) to stderr.
type runFunc = func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// commands is the command table: a new subcommand is one entry.
var commands = []command{
	{"gen", "[-n N] [-kind snowflake|uuidv7|chain] [-name chain] [-machine M | -store DSN|URL] [-layout layout] [-format format] [-zone zone]",
		"print N new IDs, one per line", setupGen,
		"Without -store, snowflake IDs use -machine (0 by default) with no lease, which gen says on stderr: two processes\n" +
			"issuing under one machine ID at once can issue the same IDs. With -store, gen leases a machine ID from the store,\n" +
			"as serve does, and gives it back on exit; chains need one. A dated format (-kind chain) counts from 1 every day,\n" +
			"month or year: literal text and {yyyy}, {MM}, {dd}, {seq:N} in that order, as in INV-{yyyy}{MM}{dd}-{seq:6}."},
	{"decode", "[-layout layout] [-format format] ID", "print an ID's time, machine and sequence (or a UUIDv7's time) as JSON", setupDecode,
		"The JSON is what serve's /v1/decode answers. An ID that cannot be a snowflake ID of the layout (too small, its time\n" +
			"within an hour of the epoch, as chain IDs are; or its time in the future) is decoded with a warning on stderr."},
	{"layout", "[-layout layout]", "print a layout's bit split, capacity and end date", setupLayout, ""},
	{"serve", "[-addr 127.0.0.1:8080] [-store DSN|URL] [-namespace ns] [-layout layout] [-chains a,b] [-dated name=format,...] [-zone zone] [-tokens file] [-proxy]", "serve IDs over HTTP, with metrics and a state page", setupServe,
		"routes: GET /v1/ids (?kind=uuidv7 for UUIDs), /v1/ids/{chain} (?count=1.." + strconv.Itoa(wire.MaxCount) + "&format=),\n" +
			"/v1/decode/{id} (?format=), /v1/layout, /healthz, /readyz, /metrics and / (the state page); see docs/serve.md.\n" +
			"formats (?format=): " + strings.Join(wire.Formats, ", ") + "; decimal (the default)\n" +
			"gives JSON strings, number JSON numbers, friendly is for snowflake IDs only. A chain also takes a dated\n" +
			"format, URL-encoded: ?format=INV-%7Byyyy%7D%7BMM%7D%7Bdd%7D-%7Bseq:6%7D (or -dated gives it one).\n" +
			"/v1/decode/{id} reads decimal and friendly IDs and UUIDv7s as they are; radix62 and radix36 IDs need\n" +
			"?format=radix62 or ?format=radix36."},
	{"schema", "[-dialect mysql|postgres|sqlite] [-prefix idforge_]", "print the CREATE TABLE statements of the ID tables", setupSchema, ""},
	{"store", "[-store DSN|URL] [-namespace ns] [-force] [-exists-ok] [-raise N] " + storeActionList("|"), "set up and inspect a store", setupStore,
		"Flags may come before or after the action: idforge store init -store URL.\n" +
			"init creates the store's tables and a brand-new epoch on a store that has none (on SQL, only on empty\n" +
			"tables): its sequences then start at Start. A store found without an epoch is otherwise taken for one\n" +
			"that may have been wiped, and a sequence missing from it starts only above a Floor. Run it once, when\n" +
			"the store is set up: on a store that already has an epoch it changes nothing, says so and exits 1\n" +
			"(0 with -exists-ok, for a setup step that runs at every deploy).\n" +
			"machines lists the machine IDs of -namespace: holder instance, stable, held, last timestamp.\n" +
			"release gives one back (keeping its last timestamp for the next holder to wait out); a holder that\n" +
			"heartbeated within the store's reset grace is refused unless -force. chain shows a sequence's\n" +
			"counter; with -raise N it raises it to at least N, never lowering it. restored, run after restoring\n" +
			"the store from a backup, gives it a new epoch and marks every sequence untrusted: each then starts\n" +
			"only above a Floor or a -raise, and running processes go on above what they held. All of them work\n" +
			"on the SQL stores and on Redis, and need the store itself: not the HTTP address of an idforge serve\n" +
			"-proxy."},
	{"version", "", "print the module version and VCS revision it was built from", setupVersion, ""},
}

// usageError marks a bad command line or a bad ID: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run runs the command line args (without the program name) and returns the
// exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(args, stdout, stderr)
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "idforge: unknown command %q\n\n", name)
		printUsage(stderr)
		return 2
	}
	fs := newFlagSet(cmd, stderr)
	exec := cmd.setup(fs)
	args, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package has printed the error and the usage
	}
	err = exec(ctx, args, stdout, stderr)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "idforge %s: %s\n", cmd.name, strings.TrimPrefix(err.Error(), "idforge: "))
	// A configuration the library refuses came from the flags or the
	// environment: a bad command line too.
	if errors.As(err, new(usageError)) || errors.Is(err, engine.ErrInvalidConfig) {
		return 2
	}
	return 1
}

// parseArgs parses args with fs and returns the arguments that are not
// flags. Flags may come before, between and after them, as with go and git:
// `idforge store init -store X` is `idforge store -store X init`. After
// "--" everything is an argument.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if n := len(args) - len(left); n > 0 && args[n-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest, args = append(rest, left[0]), left[1:]
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func newFlagSet(cmd command, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("idforge "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: idforge %s %s\n\n%s.\n\n", cmd.name, cmd.args, cmd.summary)
		fs.PrintDefaults()
		if cmd.details != "" {
			fmt.Fprintf(out, "\n%s\n", cmd.details)
		}
	}
	return fs
}

func help(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		printUsage(stdout)
		return 0
	case 1:
		if cmd, ok := lookup(args[0]); ok {
			fs := newFlagSet(cmd, stdout)
			cmd.setup(fs)
			fs.Usage()
			return 0
		}
		fmt.Fprintf(stderr, "idforge help: unknown command %q\n\n", args[0])
	default:
		fmt.Fprintf(stderr, "idforge help: want at most one command, got %q\n\n", args)
	}
	printUsage(stderr)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: idforge <command> [flags] [arguments]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-7s %s\n\n", "help", "print this help, or a command's flags with help <command>")
	fmt.Fprintf(w, "layouts: %s\nformats: %s\n", strings.Join(layoutNames(), ", "), strings.Join(formatNames, ", "))
}
