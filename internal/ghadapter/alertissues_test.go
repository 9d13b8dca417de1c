package ghadapter_test

import (
	"testing"

	"github.com/latestwins/latestwins/internal/ghadapter"
)

// Without the App's ports the notifier gets no issue port at all (a nil interface), so that it
// says an alert-issue cannot be kept instead of calling through a nil pointer.
func TestAlertIssuesWithoutTheApp(t *testing.T) {
	var none *ghadapter.Ports
	if none.AlertIssues() != nil {
		t.Error("no Ports: AlertIssues is not a nil interface")
	}
	if (&ghadapter.Ports{}).AlertIssues() != nil {
		t.Error("Ports without Issues: AlertIssues is not a nil interface")
	}
	if (&ghadapter.Ports{Issues: &ghadapter.Issues{}}).AlertIssues() == nil {
		t.Error("Ports with Issues: no issue port")
	}
}
