//go:build unix

package admin_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/admin"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// browserTimeout bounds one headless browser run; a run takes about 2 s
// on the machine of docs/performance.md.
const browserTimeout = 90 * time.Second

// findChromium returns the headless browser to test the page with: $CHROMIUM,
// or Debian's chromium (apt-get install chromium), or Chrome.
func findChromium(t *testing.T) string {
	if bin := os.Getenv("CHROMIUM"); bin != "" {
		return bin
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	t.Skip("no chromium on PATH (Debian: apt-get install chromium; or set CHROMIUM): the live page's browser test needs one")
	return ""
}

// browse loads url in headless chromium at 1280x1400, lets the page run
// for a few seconds of the browser's virtual time (its refresh timer fires
// every second of it), and returns the document as the page left it; with
// png set, it also writes a screenshot of the window there.
func browse(t *testing.T, bin, url, png string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--user-data-dir=" + t.TempDir(),
		"--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=1280,1400",
		"--virtual-time-budget=3000", "--dump-dom"}
	if png != "" {
		args = append(args, "--screenshot="+png)
	}
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	// The browser starts processes of its own: end them all with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // any helper left behind
	if err != nil || !strings.Contains(stdout.String(), "</html>") {
		t.Fatalf("%s --dump-dom %s: %v after %v\nstdout:\n%.2000s\nstderr:\n%.4000s", bin, url, err, time.Since(start), stdout.String(), stderr.String())
	}
	t.Logf("the browser ran %v", time.Since(start).Round(time.Millisecond))
	return stdout.String()
}

// artifact returns the path to write a test's file name to: in
// $RPCD_ARTIFACTS, kept, if it is set, else in the test's temporary
// directory, removed with it.
func artifact(t *testing.T, name string) string {
	dir := os.Getenv("RPCD_ARTIFACTS")
	if dir == "" {
		return filepath.Join(t.TempDir(), name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// field returns the text of the element with id in dom.
func field(t *testing.T, dom, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no element %q in the page:\n%s", id, dom)
	}
	return m[1]
}

// cell returns the text of the cell of class col in the row of route.
func cell(t *testing.T, dom, route, col string) string {
	t.Helper()
	m := regexp.MustCompile(`<tr data-route="` + regexp.QuoteMeta(route) + `">.*?<td class="` + col + `[^"]*">([^<]*)</td>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no %s cell for %s in the page:\n%s", col, route, dom)
	}
	return m[1]
}

// number reads a count as the page writes it ("1,234").
func number(t *testing.T, s string) float64 {
	t.Helper()
	n, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// attr returns the value of attribute name of the element with id in dom.
func attr(t *testing.T, dom, id, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindString(dom)
	v := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `="([^"]*)"`).FindStringSubmatch(m)
	if v == nil {
		t.Fatalf("no %s on #%s in the page:\n%s", name, id, m)
	}
	return v[1]
}

// TestLivePageInBrowser loads the live page in a real headless browser
// after a few seconds of calls, errors and a loop stall, with a call
// every few milliseconds going on: the tiles show the server's figures,
// the handler time says it is, and the four charts, drawn by uPlot, show
// the history the server kept from before the page opened, across the
// whole width of their plots (the screenshot says so, pixel by pixel).
func TestLivePageInBrowser(t *testing.T) {
	bin := findChromium(t)
	reg := testRoutes()
	stuckRoute(reg, 80*time.Millisecond)
	const interval = 100 * time.Millisecond
	r := newRigAdmin(t, reg, reactor.Options{InlineThreshold: 20 * time.Millisecond}, admin.Options{SampleInterval: interval})
	var (
		mu    sync.Mutex
		paths []string // the requests the page made
	)
	see := func(req *http.Request) {
		mu.Lock()
		paths = append(paths, req.URL.RequestURI())
		mu.Unlock()
	}
	r.observe.Store(&see)
	c := r.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	echo := func(n int) {
		for range n {
			if _, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("ping"), nil); err != nil {
				t.Error(err)
				return
			}
		}
	}

	// Twenty-five sample intervals of history: calls rising and falling,
	// errors every fifth interval, a loop stall in the middle.
	denied, echoes := 0, 0
	for i := range 25 {
		next := time.Now().Add(interval)
		n := 20 + 15*min(i, 24-i)
		echo(n)
		echoes += n
		if i%5 == 2 {
			for range 3 {
				c.CallRaw(ctx, "Test/Denied", nil, nil)
				denied++
			}
		}
		if i == 12 {
			r.overrun(t, c, "Test/Stuck", 1)
		}
		time.Sleep(time.Until(next))
	}
	// The history stops here: the screenshot and the dumped page are taken
	// at moments of their own, and a point sampled between them would move
	// the time axis of one and not of the other. Rates and percentiles are
	// still read live, from the counters.
	r.h.Close()
	before := r.h.History(0)
	if len(before.Time) < 20 {
		t.Fatalf("%d points of history after 25 intervals of %v", len(before.Time), interval)
	}
	stallAt := 0.0 // the end of the interval the stall was counted in
	for i, n := range before.Overruns {
		if n > 0 {
			stallAt = before.Time[i]
		}
	}

	// Calls go on while the browser runs, so that the rates are not 0.
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				echo(1)
			}
		}
	}()
	png := artifact(t, "live-page.png")
	dom := browse(t, bin, r.admin+"/", png)
	close(stop)
	<-loaded
	t.Logf("the page's screenshot: %s", png)

	for id, want := range map[string]string{
		"status":       "serving",
		"addr":         r.srv.Addr().String(),
		"conns":        "1",
		"errors-total": strconv.Itoa(denied),
		"in-flight":    "0",
		"slow":         "0",
		"overruns":     "1",
	} {
		if got := field(t, dom, id); got != want {
			t.Errorf("#%s shows %q, want %q", id, got, want)
		}
	}
	for id, pattern := range map[string]string{
		"p50": `^[0-9.]+ (ns|µs|ms)$`, "p90": `^[0-9.]+ (ns|µs|ms)$`, "p99": `^[0-9.]+ (ns|µs|ms)$`,
		"calls-per-s": `^[0-9.,]+$`, "bytes-in-per-s": `^[0-9.]+ (B|KiB|MiB)/s$`,
		"build": `^\S+ · \S+ · ` + regexp.QuoteMeta(runtime.Version()) + `$`,
	} {
		if got := field(t, dom, id); !regexp.MustCompile(pattern).MatchString(got) {
			t.Errorf("#%s shows %q, want %s", id, got, pattern)
		}
	}
	if got := number(t, field(t, dom, "calls-total")); got < float64(echoes+denied+1) {
		t.Errorf("#calls-total shows %v, want at least %d", got, echoes+denied+1)
	}
	if got := number(t, field(t, dom, "calls-per-s")); got <= 0 {
		t.Errorf("#calls-per-s shows %v, want more than 0", got)
	}
	if got := number(t, cell(t, dom, builtin.EchoPacket, "calls")); got < float64(echoes) {
		t.Errorf("%s calls %v, want at least %d", builtin.EchoPacket, got, echoes)
	}
	if got := cell(t, dom, "Test/Denied", "errors"); got != strconv.Itoa(denied) {
		t.Errorf("Test/Denied errors %q, want %d", got, denied)
	}
	if got := cell(t, dom, builtin.EchoPacket, "p99"); got == "–" {
		t.Errorf("%s has no p99", builtin.EchoPacket)
	}
	if m := regexp.MustCompile(`<tr data-inline-route="Test/Stuck"><td class="route">Test/Stuck</td><td class="overruns some">1</td><td class="where">event loop</td></tr>`).FindString(dom); m == "" {
		t.Error("the table of inline overruns does not show Test/Stuck's")
	}
	// Handler time says what it is.
	for _, want := range []string{">handler p50<", ">handler p99<", "Not a round trip", ">handler p99</th>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page does not say %q", want)
		}
	}

	// The charts: made by uPlot, each with every point the server had
	// (the page still asks for newer ones, and gets none).
	firstBefore := before.Time[0]
	for _, id := range []string{"chart-calls", "chart-errors", "chart-latency", "chart-stalls"} {
		box := regexp.MustCompile(`(?s)<div class="chart" id="` + id + `".*?</table>`).FindString(dom)
		if !strings.Contains(box, `class="uplot`) || !strings.Contains(box, "<canvas") || strings.Count(box, `class="u-axis`) != 2 {
			t.Errorf("#%s: no uPlot chart with two axes in it:\n%.600s", id, box)
		}
		points := number(t, attr(t, dom, id, "data-points"))
		first := number(t, attr(t, dom, id, "data-first"))
		if points != float64(len(before.Time)) || first != firstBefore {
			t.Errorf("#%s: %v points from %v; the server had %d from %v when the page opened", id, points, first, len(before.Time), firstBefore)
		}
	}
	mu.Lock()
	requested := strings.Join(paths, "\n")
	mu.Unlock()
	for _, want := range []string{"/uplot/uPlot.iife.min.js", "/uplot/uPlot.min.css", "/history.json\n", "/history.json?since="} {
		if !strings.Contains(requested+"\n", want) {
			t.Errorf("the page did not ask for %s; it asked for:\n%s", want, requested)
		}
	}
	if t.Failed() {
		t.Fatalf("the page as loaded:\n%s", dom)
	}

	// The screenshot: each chart's line, or bars, spans its plot from left
	// to right, not just the end where the page opened.
	img := readPNG(t, png)
	for _, tc := range []struct {
		id    string
		color color.RGBA
	}{
		{"chart-calls", color.RGBA{0x25, 0x63, 0xeb, 0xff}},
		{"chart-errors", color.RGBA{0xc0, 0x39, 0x2b, 0xff}},
		{"chart-latency", color.RGBA{0xd9, 0x77, 0x06, 0xff}}, // p99
		{"chart-stalls", color.RGBA{0x7c, 0x3a, 0xed, 0xff}},
	} {
		var box [4]int // left, top, width, height
		for i, f := range strings.Split(attr(t, dom, tc.id, "data-plot"), ",") {
			box[i] = int(number(t, f))
		}
		lo, hi := columnsWith(img, box, tc.color, 0)
		t.Logf("%s: plot at %v, its color from x=%d to x=%d", tc.id, box, lo, hi)
		if lo < 0 {
			t.Errorf("%s: nothing drawn in %v in the screenshot %s", tc.id, tc.color, png)
			continue
		}
		if tc.id == "chart-stalls" {
			// One stall: a step up over the interval it was counted in,
			// where the time axis puts that interval's end.
			first, last := number(t, attr(t, dom, tc.id, "data-first")), number(t, attr(t, dom, tc.id, "data-last"))
			at := box[0] + int(float64(box[2])*(stallAt-first)/(last-first))
			lo, hi := columnsWith(img, box, tc.color, 4)
			t.Logf("%s: the stall counted at %v is drawn from x=%d to x=%d; its interval ends at x=%d", tc.id, stallAt, lo, hi, at)
			if lo < 0 || at < lo-2 || at > hi+2 || hi-lo > box[2]/10 {
				t.Errorf("%s: the stall is drawn from x=%d to x=%d, want a step that ends about x=%d (screenshot %s)", tc.id, lo, hi, at, png)
			}
			continue
		}
		if lo > box[0]+box[2]/10 || hi < box[0]+box[2]*9/10 {
			t.Errorf("%s: drawn from x=%d to x=%d of the plot at %v: the history does not span it (screenshot %s)", tc.id, lo, hi, box, png)
		}
	}
}

// readPNG decodes the PNG file at path.
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// columnsWith returns the first and last x within box (left, top, width,
// height) whose column has a pixel of about color c, at least above
// pixels over the box's bottom edge; or -1, -1.
func columnsWith(img image.Image, box [4]int, c color.RGBA, above int) (lo, hi int) {
	lo, hi = -1, -1
	near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -28 && d < 28 }
	for x := box[0]; x < box[0]+box[2]; x++ {
		for y := box[1]; y < box[1]+box[3]-above; y++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if near(r, c.R) && near(g, c.G) && near(b, c.B) {
				if lo < 0 {
					lo = x
				}
				hi = x
				break
			}
		}
	}
	return lo, hi
}
