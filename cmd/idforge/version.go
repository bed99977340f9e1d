package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

func setupVersion(*flag.FlagSet) runFunc {
	return func(_ context.Context, args []string, stdout, _ io.Writer) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		_, err := io.WriteString(stdout, version(debug.ReadBuildInfo()))
		return err
	}
}

// version describes the build from its build information: the module's
// version ("(devel)" for a build in a checkout), the VCS revision and time
// Go stamps into builds in a checkout, and the Go release.
func version(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return fmt.Sprintf("idforge: no build information\n%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := "revision unknown (not stamped: built outside a VCS checkout, with -buildvcs=false, or by go run or go test)"
	if r := vcs["vcs.revision"]; r != "" {
		rev = "revision " + r
		if t := vcs["vcs.time"]; t != "" {
			rev += " " + t
		}
		if vcs["vcs.modified"] == "true" {
			rev += " (modified)"
		}
	}
	return fmt.Sprintf("idforge %s %s\n%s\n%s %s/%s\n", bi.Main.Version, bi.Main.Path, rev, bi.GoVersion, runtime.GOOS, runtime.GOARCH)
}
