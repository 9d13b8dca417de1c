package devissuer

import "testing"

func TestLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "[::1]:0": true, "localhost:9": true, "127.0.0.2:1": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:0": false} {
		if err := Loopback(addr); (err == nil) != ok {
			t.Errorf("Loopback(%q) = %v; want loopback %v", addr, err, ok)
		}
	}
}
