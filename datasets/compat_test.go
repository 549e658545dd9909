package datasets

// parseAdultNumber is the name FuzzAdultNumber knows the decimal parser by: the Adult loader's,
// now every text loader's (parseDecimal).
func parseAdultNumber(s string) (float64, *numberError) { return parseDecimal(s) }
