package nn

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Model-file fields of the grouped and weight-standardized convolutions, the residual block's
// shortcut, dropout and the loss (docs/models.md).

// convExtFields reads conv2d's optional "groups" (1 to the filters; absent: 1) and
// "standardize" (a JSON boolean; absent: false).
func convExtFields(fields map[string]json.RawMessage, where string, s *LayerSpec) error {
	if v, ok := fields["groups"]; ok {
		hi := max(s.Filters, 1)
		var n int64
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("layer %s: \"groups\": want an integer from 1 to %d (the filters)", where, hi)
		}
		if n < 1 || n > int64(hi) {
			return fmt.Errorf("layer %s: \"groups\" = %d: want 1 to %d (the filters), dividing the input channels and the filters", where, n, hi)
		}
		s.Groups = int(n)
	}
	if v, ok := fields["standardize"]; ok {
		if err := json.Unmarshal(v, &s.Standardize); err != nil {
			return fmt.Errorf("layer %s: \"standardize\": want true or false", where)
		}
	}
	return nil
}

// parseShortcut reads a residual block's optional "shortcut", a non-empty list of layers applied
// to the block's input in place of the identity (a projection where the body changes the
// shape); its layers are named WHERE.shortcut.J.
func parseShortcut(fields map[string]json.RawMessage, where string, depth int, count *int) ([]LayerSpec, error) {
	v, ok := fields["shortcut"]
	if !ok {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(v, &list); err != nil || len(list) == 0 {
		return nil, fmt.Errorf("layer %s: \"shortcut\": want a non-empty list of layers (or no shortcut field: the identity)", where)
	}
	return parseLayers(list, strings.SplitN(where, " ", 2)[0]+".shortcut.", depth+1, count)
}

// parseLoss reads the model file's optional "loss": softmax_xent (the default, stored as ""),
// bce or mse.
func parseLoss(v *string) (string, error) {
	if v == nil || *v == LossXent {
		return "", nil
	}
	switch *v {
	case LossBCE, LossMSE:
		return *v, nil
	}
	return "", fmt.Errorf("\"loss\" = %q: want %s (the default), %s or %s", *v, LossXent, LossBCE, LossMSE)
}

// dropoutField reads dropout's required "rate", a number with 0 ≤ rate < 1.
func dropoutField(fields map[string]json.RawMessage, where string, s *LayerSpec) error {
	v, ok := fields["rate"]
	if !ok {
		return fmt.Errorf("layer %s: \"rate\" is required (0 ≤ rate < 1)", where)
	}
	if err := json.Unmarshal(v, &s.Rate); err != nil || !(s.Rate >= 0 && s.Rate < 1) {
		return fmt.Errorf("layer %s: \"rate\": want a number with 0 ≤ rate < 1", where)
	}
	return nil
}
