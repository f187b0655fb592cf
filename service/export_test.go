package service

// Check reports whether ts accepts the bearer value, and the token's
// name.
func Check(ts *TokenSet, bearer string) (bool, string) {
	t, ok := ts.lookup(bearer)
	if !ok {
		return false, ""
	}
	return true, t.Name
}
