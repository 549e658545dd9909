package federated

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/privacy/personalized"
)

func TestParseClientsCSV(t *testing.T) {
	in := "# budgets\n" +
		"ID, Epsilon, delta, sample_rate, share, sensitivity\n" +
		"alice,1,1e-5,0.5,0.25,\n" +
		"\n" +
		"bob,2.5,2e-5,0.25,0.5,2\n" +
		"\"carol\",4,1e-6,0.25,0.25,1\n"
	cs, err := ParseClients(strings.NewReader(in), "c.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d clients, want 3", len(cs))
	}
	want := []dpsgd.Client{
		{ID: "alice", Epsilon: 1, Delta: 1e-5, SampleRate: 0.5, Share: 0.25},
		{ID: "bob", Epsilon: 2.5, Delta: 2e-5, SampleRate: 0.25, Share: 0.5, Sensitivity: 2},
		{ID: "carol", Epsilon: 4, Delta: 1e-6, SampleRate: 0.25, Share: 0.25, Sensitivity: 1},
	}
	for i, w := range want {
		c := cs[i]
		if c.ID != w.ID || c.Epsilon != w.Epsilon || c.Delta != w.Delta || c.SampleRate != w.SampleRate || c.Share != w.Share || c.Sensitivity != w.Sensitivity {
			t.Errorf("client %d: %+v, want %+v", i, c, w)
		}
		if math.Abs(personalized.DeltaTotal(c.DeltaPrime, c.DeltaTail)-c.Delta) > 1e-15*c.Delta || c.DeltaPrime != c.DeltaTail {
			t.Errorf("client %d: δ' %v, δ‴ %v do not split δ %v evenly", i, c.DeltaPrime, c.DeltaTail, c.Delta)
		}
	}
}

func TestParseClientsDeltaForms(t *testing.T) {
	in := "id,epsilon,delta,delta_prime,delta_tail\n" +
		"a,1,,1e-6,2e-6\n" + // δ from both parts
		"b,1,1e-5,4e-6,\n" + // δ‴ from δ and δ'
		"c,1,1e-5,,4e-6\n" + // δ' from δ and δ‴
		"d,1,1e-5,,\n" // even split
	cs, err := ParseClients(strings.NewReader(in), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := cs[0].Delta; math.Abs(got-(3e-6-2e-12)) > 1e-20 {
		t.Errorf("a: δ = %v, want 1e-6 + 2e-6 − 2e-12", got)
	}
	if cs[1].DeltaPrime != 4e-6 || math.Abs(personalized.DeltaTotal(cs[1].DeltaPrime, cs[1].DeltaTail)-1e-5) > 1e-20 {
		t.Errorf("b: %+v", cs[1])
	}
	if cs[2].DeltaTail != 4e-6 || math.Abs(personalized.DeltaTotal(cs[2].DeltaPrime, cs[2].DeltaTail)-1e-5) > 1e-20 {
		t.Errorf("c: %+v", cs[2])
	}
	if cs[3].DeltaPrime != cs[3].DeltaTail {
		t.Errorf("d: %+v", cs[3])
	}
	if cs[0].SampleRate != 0 || cs[0].Share != 0 {
		t.Errorf("a: rate and share not given, got %v and %v", cs[0].SampleRate, cs[0].Share)
	}
}

func TestParseClientsJSON(t *testing.T) {
	for _, in := range []string{
		`[{"id":"x","epsilon":1,"delta":1e-5},{"id":7,"epsilon":2,"delta_prime":1e-6,"delta_tail":1e-6,"sample_rate":null}]`,
		"{\n \"clients\": [\n  {\"id\": \"x\", \"epsilon\": 1, \"delta\": 1e-5},\n  {\"id\": \"7\", \"epsilon\": 2.0, \"delta_prime\": 1e-6, \"delta_tail\": 1e-6}\n ]\n}\n",
	} {
		cs, err := ParseClients(strings.NewReader(in), "c.json")
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if len(cs) != 2 || cs[0].ID != "x" || cs[1].ID != "7" || cs[1].Epsilon != 2 || cs[1].DeltaPrime != 1e-6 {
			t.Errorf("%s: %+v", in, cs)
		}
		if math.Abs(cs[1].Delta-(2e-6-1e-12)) > 1e-20 {
			t.Errorf("δ = %v", cs[1].Delta)
		}
	}
}

// TestParseClientsErrors: every bad input gives a *ParseError matching ErrClientsFile that names
// the line and the field, and says what is valid.
func TestParseClientsErrors(t *testing.T) {
	hdr := "id,epsilon,delta,sample_rate,share\n"
	cases := []struct {
		name, in   string
		line       int
		field, has string
	}{
		{"empty", "", 0, "", "empty file"},
		{"header only", hdr, 1, "", "no clients"},
		{"unknown column", "id,epsilon,colour\n", 1, "column 3", "unknown column"},
		{"duplicate column", "id,epsilon,epsilon\n", 1, "epsilon", "twice"},
		{"no epsilon column", "id,delta\nx,1e-5\n", 1, "epsilon", "required"},
		{"zero epsilon", hdr + "a,0,1e-5,0.5,0.5\n", 2, "epsilon", "> 0"},
		{"negative epsilon", hdr + "a,1,1e-5,0.5,0.5\nb,-2,1e-5,0.5,0.5\n", 3, "epsilon", "> 0"},
		{"nan epsilon", hdr + "a,NaN,1e-5,0.5,0.5\n", 2, "epsilon", "finite"},
		{"inf epsilon", hdr + "a,+Inf,1e-5,0.5,0.5\n", 2, "epsilon", "finite"},
		{"text epsilon", hdr + "a,one,1e-5,0.5,0.5\n", 2, "epsilon", "not a finite number"},
		{"delta 1", hdr + "a,1,1,0.5,0.5\n", 2, "delta", "(0, 1)"},
		{"delta 0", hdr + "a,1,0,0.5,0.5\n", 2, "delta", "(0, 1)"},
		{"no delta", "id,epsilon\na,1\n", 2, "delta", "missing"},
		{"delta prime alone", "id,epsilon,delta_prime\na,1,1e-6\n", 2, "delta", "missing"},
		{"inconsistent deltas", "id,epsilon,delta,delta_prime,delta_tail\na,1,1e-5,1e-6,1e-6\n", 2, "delta", "consistent"},
		{"delta prime too big", "id,epsilon,delta,delta_prime\na,1,1e-5,2e-5\n", 2, "delta_prime", "(0, delta"},
		{"rate 0", hdr + "a,1,1e-5,0,0.5\n", 2, "sample_rate", "(0, 1]"},
		{"rate above 1", hdr + "a,1,1e-5,1.5,0.5\n", 2, "sample_rate", "(0, 1]"},
		{"share 0", hdr + "a,1,1e-5,0.5,0\n", 2, "share", "(0, 1]"},
		{"shares sum", hdr + "a,1,1e-5,0.5,0.5\nb,1,1e-5,0.5,0.4\n", 0, "share", "sum to 0.9"},
		{"rate missing for one", hdr + "a,1,1e-5,0.5,0.5\nb,1,1e-5,,0.5\n", 3, "sample_rate", "every client or for none"},
		{"duplicate id", hdr + "a,1,1e-5,0.5,0.5\na,2,1e-5,0.5,0.5\n", 3, "id", "twice (first on line 2)"},
		{"empty id", hdr + ",1,1e-5,0.5,0.5\n", 2, "id", "non-empty"},
		{"id with comma", hdr + "\"a,b\",1,1e-5,0.5,0.5\n", 2, "id", "printable"},
		{"sensitivity below 1", "id,epsilon,delta,sensitivity\na,1,1e-5,0.5\n", 2, "sensitivity", "≥ 1"},
		{"short row", hdr + "a,1,1e-5,0.5,0.5\nb,1\n", 3, "", "2 fields, want 5"},
		{"bad quote", hdr + "a,1,1e-5,0.5,0.5\n\"b,1,1e-5,0.5,0.5\n", 3, "", "malformed CSV"},
		{"not utf8", hdr + "a\xff,1,1e-5,0.5,0.5\n", 2, "", "UTF-8"},
		{"json syntax", "[{\"id\":\"a\",\n\"epsilon\":}]", 2, "", "malformed JSON"},
		{"json truncated", "[{\"id\":\"a\",\"epsilon\":1,\"delta\":1e-5}", 1, "", "malformed JSON"},
		{"json unknown key", "[\n{\"id\":\"a\",\"epsilon\":1,\"delta\":1e-5},\n{\"id\":\"b\",\"eps\":1}]", 3, "eps", "unknown key"},
		{"json string number", "[{\"id\":\"a\",\"epsilon\":\"1\",\"delta\":1e-5}]", 1, "epsilon", "not a number"},
		{"json not array", "{\"client\": []}", 1, "", "top-level key"},
		{"json empty", "[]", 1, "", "no clients"},
		{"json element not object", "[1]", 1, "", "want a JSON object"},
		{"json null element", "[null]", 1, "", "null"},
		{"json trailing", "[{\"id\":\"a\",\"epsilon\":1,\"delta\":1e-5}] x", 1, "", "trailing"},
		{"json huge number", "[{\"id\":\"a\",\"epsilon\":1e999,\"delta\":1e-5}]", 1, "epsilon", "finite"},
		{"json duplicate id", "[{\"id\":\"a\",\"epsilon\":1,\"delta\":1e-5},\n{\"id\":\"a\",\"epsilon\":1,\"delta\":1e-5}]", 2, "id", "twice"},
	}
	for _, c := range cases {
		_, err := ParseClients(strings.NewReader(c.in), "f")
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, ErrClientsFile) {
			t.Errorf("%s: error %T %v is not a *ParseError matching ErrClientsFile", c.name, err, err)
			continue
		}
		if pe.Line != c.line || pe.Field != c.field || !strings.Contains(pe.Msg, c.has) {
			t.Errorf("%s: line %d field %q msg %q; want line %d field %q and %q", c.name, pe.Line, pe.Field, pe.Msg, c.line, c.field, c.has)
		}
	}
}

// FuzzParseClients: no input makes ParseClients panic; what it accepts satisfies every rule.
func FuzzParseClients(f *testing.F) {
	for _, s := range []string{
		"id,epsilon,delta,sample_rate,share\na,1,1e-5,0.5,0.5\nb,2,1e-5,0.5,0.5\n",
		"id,epsilon,delta_prime,delta_tail\na,1,1e-6,1e-6\n",
		"# c\nid,epsilon,delta\n\"x\",1,1e-5\n",
		`[{"id":"a","epsilon":1,"delta":1e-5,"share":1,"sample_rate":1}]`,
		`{"clients":[{"id":"a","epsilon":4,"delta_prime":1e-6,"delta_tail":1e-7,"sensitivity":2}]}`,
		"id,epsilon\n", "[", "{}", "id,epsilon,delta\na,1,1e-5\na,1,1e-5\n", "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParseClients(strings.NewReader(string(data)), "fuzz")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Msg == "" {
				t.Fatalf("error %T %v: want a *ParseError with a message", err, err)
			}
			return
		}
		if len(cs) == 0 {
			t.Fatal("no clients and no error")
		}
		ids := map[string]bool{}
		var shares float64
		for _, c := range cs {
			if c.ID == "" || ids[c.ID] {
				t.Fatalf("id %q empty or repeated", c.ID)
			}
			ids[c.ID] = true
			if !(c.Epsilon > 0) || math.IsInf(c.Epsilon, 0) {
				t.Fatalf("epsilon %v", c.Epsilon)
			}
			for _, d := range []float64{c.Delta, c.DeltaPrime, c.DeltaTail} {
				if !(d > 0 && d < 1) {
					t.Fatalf("delta out of (0, 1): %+v", c)
				}
			}
			if math.Abs(personalized.DeltaTotal(c.DeltaPrime, c.DeltaTail)-c.Delta) > 1e-9*c.Delta {
				t.Fatalf("inconsistent deltas %+v", c)
			}
			if c.SampleRate < 0 || c.SampleRate > 1 || c.Share < 0 || c.Share > 1 || (c.Sensitivity != 0 && c.Sensitivity < 1) {
				t.Fatalf("out of range %+v", c)
			}
			if (c.Share == 0) != (cs[0].Share == 0) || (c.SampleRate == 0) != (cs[0].SampleRate == 0) {
				t.Fatalf("share or rate given for some clients only")
			}
			shares += c.Share
		}
		if cs[0].Share != 0 && math.Abs(shares-1) > dpsgd.ShareTolerance {
			t.Fatalf("shares sum to %v", shares)
		}
	})
}
