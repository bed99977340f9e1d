// Package browsertest loads the state page of `idforge serve` in a real
// headless Chromium (Debian's package, driven by chromedp). It is a module
// of its own so that the idforge module does not depend on chromedp; .ci/run
// installs Chromium and runs it:
//
//	cd cmd/idforge/browsertest && go test ./...
//
// IDFORGE_UPDATE_SCREENSHOT=1 rewrites docs/serve-page.png.
package browsertest
