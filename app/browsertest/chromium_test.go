//go:build unix

package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/testutil"
)

// chromiumEnv names the variable that points the tests at a Chromium binary; without it they look
// for Debian's chromium (and its usual other names) on PATH.
const chromiumEnv = "LATESTWINS_TEST_CHROMIUM"

// launchTimeout bounds one browser launch, from start to exit.
const launchTimeout = 45 * time.Second

// windowSize is the viewport of every launch, so that screenshots have a known size.
const windowW, windowH = 1280, 900

// chromiumPath returns the browser to run, or ends the test: a failure under CI, a skip that says
// how to install it elsewhere (testutil.MissingTool).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(chromiumEnv); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s=%q: %v; point it at a Chromium binary, or unset it to use chromium from PATH", chromiumEnv, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "this test needs headless Chromium and none is on PATH. Install Debian's package " +
		"(`apt-get install --no-install-recommends chromium`, or `scripts/test --install-chromium`), or set " +
		chromiumEnv + " to a Chromium binary"
	testutil.MissingTool(t, msg)
	return ""
}

// launch is one run of the browser.
type launch struct {
	t       *testing.T
	bin     string
	home    string // user data dir, HOME and XDG dirs: nothing of the machine's is touched
	stderr  *tailBuffer
	elapsed time.Duration
}

// headlessFlags are the flags every launch gets: headless, no sandbox (the tests may run as root),
// and none of the background connections a closed network refuses.
func headlessFlags(userDataDir string) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + userDataDir,
		fmt.Sprintf("--window-size=%d,%d", windowW, windowH), "--hide-scrollbars",
	}
}

// run starts the browser with args after the common flags, in its own process group, and waits
// for it to exit; extra files become its descriptors 3, 4, ... The whole group is killed when the
// launch times out, and again once it has exited, so that no helper process outlives the launch.
// talk, when set, runs between start and exit to drive the browser; the browser is killed when
// it fails.
func (l *launch) run(ctx context.Context, args []string, extra []*os.File, talk func(ctx context.Context) error) ([]byte, error) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, launchTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.bin, append(headlessFlags(filepath.Join(l.home, "profile")), args...)...)
	cmd.Env = append(os.Environ(), "HOME="+l.home, "XDG_CONFIG_HOME="+l.home, "XDG_CACHE_HOME="+l.home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	cmd.ExtraFiles = extra
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, l.stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", l.bin, err)
	}
	// The group is killed however the launch ends, even when the test fails half way.
	defer func() { _ = killGroup(cmd) }()
	var talkErr error
	if talk != nil {
		talkErr = talk(ctx)
		if talkErr != nil {
			_ = killGroup(cmd)
		}
	}
	err := cmd.Wait()
	l.elapsed = time.Since(start)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("chromium did not finish within %s: %w", launchTimeout, errors.Join(ctx.Err(), talkErr))
	}
	if talkErr != nil {
		return nil, talkErr
	}
	if err != nil {
		return nil, fmt.Errorf("chromium %s: %w", strings.Join(args, " "), err)
	}
	return stdout.Bytes(), nil
}

// killGroup kills the process group of a started command; a group already gone is not an error.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill chromium's process group %d: %w", cmd.Process.Pid, err)
	}
	return nil
}

func newLaunch(t *testing.T, bin string) *launch {
	return &launch{t: t, bin: bin, home: t.TempDir(), stderr: &tailBuffer{max: 8 << 10}}
}

// fail ends the test with err and the end of the browser's stderr.
func (l *launch) fail(what string, err error) {
	l.t.Helper()
	l.t.Fatalf("%s: %v\nchromium stderr (end):\n%s", what, err, l.stderr.String())
}

// dumpDOM loads url with scripts enabled and returns the DOM Chromium serializes (--dump-dom).
func dumpDOM(t *testing.T, bin, url string) (string, time.Duration) {
	t.Helper()
	l := newLaunch(t, bin)
	out, err := l.run(t.Context(), []string{"--dump-dom", url}, nil, nil)
	if err != nil {
		l.fail("dump the DOM of "+url, err)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		l.fail("dump the DOM of "+url, errors.New("chromium printed nothing"))
	}
	return string(out), l.elapsed
}

// screenshot loads url and writes a PNG of the viewport to path (--screenshot).
func screenshot(t *testing.T, bin, url, path string) time.Duration {
	t.Helper()
	l := newLaunch(t, bin)
	if _, err := l.run(t.Context(), []string{"--screenshot=" + path, url}, nil, nil); err != nil {
		l.fail("screenshot "+url, err)
	}
	return l.elapsed
}

// scriptlessDOMs loads each url in turn with script execution disabled and returns the outerHTML
// of each page's root element. --dump-dom cannot do this: it reads the DOM by running script, so
// with scriptEnabled=false it prints nothing. Instead the browser is driven over the DevTools
// protocol on a pipe (--remote-debugging-pipe: commands on descriptor 3, replies on 4), where
// DOM.getOuterHTML needs no script. One launch serves every url.
func scriptlessDOMs(t *testing.T, bin string, urls ...string) ([]string, time.Duration) {
	t.Helper()
	l := newLaunch(t, bin)
	toBrowserR, toBrowserW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromBrowserR, fromBrowserW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range []*os.File{toBrowserR, toBrowserW, fromBrowserR, fromBrowserW} {
			_ = f.Close() // closing twice only returns an error
		}
	}()
	var doms []string
	talk := func(ctx context.Context) error {
		// The child holds its own copies now; closing ours lets a dead browser show as EOF.
		_ = toBrowserR.Close()
		_ = fromBrowserW.Close()
		stop := context.AfterFunc(ctx, func() { _ = fromBrowserR.Close() })
		defer stop()
		c := &cdp{w: toBrowserW, r: bufio.NewReader(fromBrowserR)}
		var err error
		doms, err = c.scriptlessDOMs(urls)
		if err != nil {
			return fmt.Errorf("devtools protocol: %w", err)
		}
		// Browser.close ends the process; its reply may never come.
		return c.send("", "Browser.close", nil)
	}
	args := []string{"--remote-debugging-pipe", "--blink-settings=scriptEnabled=false", "about:blank"}
	if _, err := l.run(t.Context(), args, []*os.File{toBrowserR, fromBrowserW}, talk); err != nil {
		l.fail("load without scripts", err)
	}
	return doms, l.elapsed
}

// cdp is a minimal DevTools protocol client: JSON messages, each ended by a NUL byte.
type cdp struct {
	w      *os.File
	r      *bufio.Reader
	nextID int64
	events []cdpMessage // events read while waiting for a reply
}

type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func (c *cdp) send(session, method string, params any) error {
	c.nextID++
	msg := map[string]any{"id": c.nextID, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %s: %w", method, err)
	}
	if _, err := c.w.Write(append(b, 0)); err != nil {
		return fmt.Errorf("send %s: %w", method, err)
	}
	return nil
}

func (c *cdp) read() (cdpMessage, error) {
	b, err := c.r.ReadBytes(0)
	if err != nil {
		return cdpMessage{}, fmt.Errorf("read from chromium: %w", err)
	}
	var m cdpMessage
	if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
		return cdpMessage{}, fmt.Errorf("decode %q: %w", b, err)
	}
	return m, nil
}

// call sends a command and decodes its result into out (when not nil).
func (c *cdp) call(session, method string, params, out any) error {
	if err := c.send(session, method, params); err != nil {
		return err
	}
	id := c.nextID
	for {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if m.ID != id {
			if m.Method != "" {
				c.events = append(c.events, m)
			}
			continue
		}
		if m.Error != nil {
			return fmt.Errorf("%s: error %d: %s", method, m.Error.Code, m.Error.Message)
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, out); err != nil {
			return fmt.Errorf("%s: decode result: %w", method, err)
		}
		return nil
	}
}

// waitEvent returns once the session has sent the event.
func (c *cdp) waitEvent(session, method string) error {
	for i, m := range c.events {
		if m.Method == method && m.SessionID == session {
			c.events = append(c.events[:i:i], c.events[i+1:]...)
			return nil
		}
	}
	for {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", method, err)
		}
		if m.Method == method && m.SessionID == session {
			return nil
		}
	}
}

func (c *cdp) scriptlessDOMs(urls []string) ([]string, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := c.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	s := attached.SessionID
	// Belt and braces beside --blink-settings: the page's own scripting switched off as well.
	if err := c.call(s, "Emulation.setScriptExecutionDisabled", map[string]any{"value": true}, nil); err != nil {
		return nil, err
	}
	if err := c.call(s, "Page.enable", nil, nil); err != nil {
		return nil, err
	}
	var out []string
	for _, url := range urls {
		var nav struct {
			ErrorText string `json:"errorText"`
		}
		if err := c.call(s, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
			return nil, err
		}
		if nav.ErrorText != "" {
			return nil, fmt.Errorf("navigate to %s: %s", url, nav.ErrorText)
		}
		if err := c.waitEvent(s, "Page.loadEventFired"); err != nil {
			return nil, err
		}
		var doc struct {
			Root struct {
				Children []struct {
					NodeID   int64  `json:"nodeId"`
					NodeName string `json:"nodeName"`
				} `json:"children"`
			} `json:"root"`
		}
		if err := c.call(s, "DOM.getDocument", map[string]any{"depth": 1}, &doc); err != nil {
			return nil, err
		}
		var root int64
		for _, ch := range doc.Root.Children {
			if ch.NodeName == "HTML" {
				root = ch.NodeID
			}
		}
		if root == 0 {
			return nil, fmt.Errorf("%s: the document has no <html> element", url)
		}
		var html struct {
			OuterHTML string `json:"outerHTML"`
		}
		if err := c.call(s, "DOM.getOuterHTML", map[string]any{"nodeId": root}, &html); err != nil {
			return nil, err
		}
		out = append(out, html.OuterHTML)
	}
	return out, nil
}

// tailBuffer keeps the last max bytes written to it: Chromium's stderr, for failure messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
