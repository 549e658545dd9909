package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
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
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			enc, _ := json.Marshal([]string{"train", "--model", "logreg", "--epochs", "200", "--sigma", "1", "--json"})
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
			// Signal once the first epoch is done (its line is on stderr).
			sc := bufio.NewScanner(stderr)
			var errText strings.Builder
			sent := false
			for sc.Scan() {
				errText.WriteString(sc.Text() + "\n")
				if !sent && strings.HasPrefix(sc.Text(), "epoch   1") {
					_ = cmd.Process.Signal(sig)
					sent = true
				}
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				_ = cmd.Process.Kill()
				t.Fatal("the child did not stop")
			}
			if !sent || cmd.ProcessState.ExitCode() != 130 {
				t.Fatalf("signal sent %v, exit %d: %s", sent, cmd.ProcessState.ExitCode(), errText.String())
			}
			m := lastJSON(t, out.String())
			if m["interrupted"] != true {
				t.Fatalf("interrupted %v", m["interrupted"])
			}
			checkStoppedEpsilon(t, m)
		})
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
