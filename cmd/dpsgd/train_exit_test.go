package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The exit test re-executes this test binary as `dpsgd` with main's signal handling: with
// DPSGD_EXIT_CHILD=1 it runs the command line in DPSGD_EXIT_ARGS (a JSON array) under a
// context that SIGINT and SIGTERM cancel, and exits with its status.
func init() {
	if os.Getenv("DPSGD_EXIT_CHILD") != "1" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("DPSGD_EXIT_ARGS")), &args); err != nil {
		os.Exit(3)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// checkStoppedEpsilon asserts that a stopped run's JSON reports the ε its ledger charged:
// a positive number, equal to the ledger's last entry, covering at least the steps taken, and
// the same number in the guarantee sentence.
func checkStoppedEpsilon(t *testing.T, m map[string]any) {
	t.Helper()
	eps, ok := m["epsilon"].(float64)
	steps, _ := m["steps"].(float64)
	covered, _ := m["epsilon_steps"].(float64)
	if !ok || !(eps > 0) || steps < 1 || covered < steps {
		t.Fatalf("epsilon %v over %v steps (covers %v): want a positive ε covering every step taken", m["epsilon"], m["steps"], m["epsilon_steps"])
	}
	led, _ := m["ledger"].(map[string]any)
	epochs, _ := led["epochs"].([]any)
	if len(epochs) == 0 {
		t.Fatalf("no ledger entries: %v", m["ledger"])
	}
	last := epochs[len(epochs)-1].(map[string]any)
	if last["epsilon"] != eps || last["steps"] != covered {
		t.Fatalf("ledger's last entry %v, JSON ε %v over %v steps", last, eps, covered)
	}
	if g, _ := m["guarantee"].(string); !strings.Contains(g, "ε = ") || strings.Contains(g, "ε = 0,") {
		t.Fatalf("guarantee %q", g)
	}
}

// TestTrainExitPathsReportEpsilon: the command reports the ledger's ε when a run diverges, is
// interrupted in-process, or gets SIGTERM or SIGINT as a process — never ε = 0.
func TestTrainExitPathsReportEpsilon(t *testing.T) {
	t.Run("diverged", func(t *testing.T) {
		code, out, errOut := runCmd(t, "train", "--model", "mlp", "--lr", "1e30", "--weight-decay", "1", "--epochs", "2", "--json", "--quiet")
		if code == 0 || !strings.Contains(errOut, "diverged") {
			t.Fatalf("exit %d, stderr %q: want a divergence error", code, errOut)
		}
		m := lastJSON(t, out)
		if m["diverged"] != true {
			t.Fatalf("diverged %v", m["diverged"])
		}
		checkStoppedEpsilon(t, m)
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var out bytes.Buffer
		// Cancel when the first epoch's line is written: the run stops inside epoch 2.
		errOut := &cancelOnWrite{needle: "epoch   1", cancel: cancel}
		code := run(ctx, []string{"train", "--model", "logreg", "--epochs", "50", "--sigma", "1", "--json"}, &out, errOut)
		if code != 130 {
			t.Fatalf("exit %d, want 130 (interrupted): %s", code, errOut.buf.String())
		}
		m := lastJSON(t, out.String())
		if m["interrupted"] != true {
			t.Fatalf("interrupted %v", m["interrupted"])
		}
		checkStoppedEpsilon(t, m)
	})
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			// Signal once the first epoch is done (its line is on stderr).
			r := signalChild(t, []string{"train", "--model", "logreg", "--epochs", "200", "--sigma", "1", "--json"}, "epoch   1", sig)
			if r.code != 130 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			m := lastJSON(t, r.stdout)
			if m["interrupted"] != true {
				t.Fatalf("interrupted %v", m["interrupted"])
			}
			checkStoppedEpsilon(t, m)
		})
	}
	// Ctrl-C before the first step: while σ is calibrated (ε = 30 takes the PLD search many
	// seconds) and while the data loads (a named pipe that no one writes: the load never ends
	// by itself). The run stops at once, exit 130, saying that nothing was trained or spent.
	t.Run("SIGINT calibrating", func(t *testing.T) {
		r := signalChild(t, []string{"train", "--target-epsilon", "30", "--epochs", "1", "--json"}, "dpsgd train: calibrating σ to ε = 30", syscall.SIGINT)
		checkInterruptedBeforeStart(t, r, "calibrating σ")
	})
	t.Run("SIGINT loading", func(t *testing.T) {
		dir := t.TempDir()
		data := filepath.Join(dir, "data.csv")
		if err := syscall.Mkfifo(data, 0o600); err != nil {
			t.Skipf("no named pipes here: %v", err)
		}
		schema := filepath.Join(dir, "schema.json")
		doc := `{"label": {"column": "y", "classes": ["a", "b"]}, "columns": [{"name": "x", "type": "numeric", "lo": 0, "hi": 1}]}`
		if err := os.WriteFile(schema, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		r := signalChild(t, []string{"train", "--data", data, "--schema", schema, "--epochs", "1", "--json"}, "dpsgd train: loading csv data from "+data, syscall.SIGINT)
		checkInterruptedBeforeStart(t, r, "loading the data")
	})
}

// childRun is what a signalled child did: its exit status, its output, and the time from the
// signal to its exit.
type childRun struct {
	code           int
	stdout, stderr string
	sent           bool
	afterSignal    time.Duration
}

// signalChild runs args in a child process (this test binary as dpsgd, with main's signal
// handling) and sends it sig when a line of its stderr starts with trigger.
func signalChild(t *testing.T, args []string, trigger string, sig syscall.Signal) childRun {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := json.Marshal(args)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "DPSGD_EXIT_CHILD=1", "DPSGD_EXIT_ARGS="+string(enc))
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer killer.Stop()
	var r childRun
	var sentAt time.Time
	sc := bufio.NewScanner(stderr)
	var errText strings.Builder
	for sc.Scan() {
		errText.WriteString(sc.Text() + "\n")
		if !r.sent && strings.HasPrefix(sc.Text(), trigger) {
			_ = cmd.Process.Signal(sig)
			r.sent, sentAt = true, time.Now()
		}
	}
	_ = cmd.Wait()
	r.afterSignal = time.Since(sentAt)
	r.code, r.stdout, r.stderr = cmd.ProcessState.ExitCode(), out.String(), errText.String()
	if !r.sent {
		t.Fatalf("no stderr line starts with %q; exit %d:\n%s", trigger, r.code, r.stderr)
	}
	return r
}

// checkInterruptedBeforeStart asserts that a run interrupted before its first step (during
// what) exited 130 within seconds of the signal, printed no JSON, and said on stderr that it
// was interrupted, where, and that nothing was spent.
func checkInterruptedBeforeStart(t *testing.T, r childRun, what string) {
	t.Helper()
	if r.code != 130 || r.afterSignal > 10*time.Second {
		t.Fatalf("exit %d, %v after the signal; want 130 at once:\n%s", r.code, r.afterSignal, r.stderr)
	}
	if strings.TrimSpace(r.stdout) != "" {
		t.Errorf("stdout %q: nothing ran, nothing to report", r.stdout)
	}
	for _, want := range []string{"interrupted before the first step", "ε = 0 spent", what} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

// cancelOnWrite records what is written and calls cancel once needle appears.
type cancelOnWrite struct {
	buf    bytes.Buffer
	needle string
	cancel func()
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.needle) {
		c.cancel()
	}
	return len(p), nil
}
