package authority

// RememberedForTest tells how many documents a remembers.
func RememberedForTest(a *Authority) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cache)
}
