package report

import (
	"slices"
	"time"
)

// Delivery is an environment's delivery report over a window of UTC days: its figures as a whole
// (every scope's summed) and per scope, and per day for the charts. Durations are in seconds in
// JSON.
type Delivery struct {
	Environment string    `json:"environment"`
	Since       time.Time `json:"since"` // the window's first UTC midnight
	Until       time.Time `json:"until"` // the report's time
	Days        int       `json:"days"`  // UTC days in the window, the last one partial
	// Through is the number of the newest event the figures count.
	Through int64 `json:"through"`
	// Total is the environment's figures; Scopes each scope's, by name: every scope of its timeline
	// within the retention, with nothing in the window or not.
	Total  Figures   `json:"total"`
	Scopes []Figures `json:"scopes"`
	// QuantileError is the bound of the lead times' and restores' relative error (HistogramError).
	QuantileError float64 `json:"quantile_error"`
}

// Figures are the delivery figures of one scope (or of the environment as a whole: Scope empty).
type Figures struct {
	Scope string `json:"scope,omitempty"`
	// Deploys in the window, and per day of it (deployment frequency).
	Deploys       int     `json:"deploys"`
	DeploysPerDay float64 `json:"deploys_per_day"`
	// Commits the deploys carried, and per deploy (coalesced by latest-wins).
	Commits          int     `json:"commits"`
	CommitsPerDeploy float64 `json:"commits_per_deploy"`
	// LeadFromAccept: from the push's acceptance to live. LeadFromCommit: from the commit's own
	// time to live, for the commits whose time is known (its Count says how many).
	LeadFromAccept Quantiles `json:"lead_from_accept"`
	LeadFromCommit Quantiles `json:"lead_from_commit"`
	// Failures (terminal) and Rollbacks, and both per deploy: the change failure rate (0 with no
	// deploy).
	Failures          int     `json:"failures"`
	Rollbacks         int     `json:"rollbacks"`
	ChangeFailureRate float64 `json:"change_failure_rate"`
	// Restore: from a change failure to the next deploy (time to restore), of the restorations
	// in the window.
	Restore Quantiles `json:"restore"`
	// BehindSeconds is how long some push waited to go live in the window (summed over scopes for
	// the environment), and BehindShare that time against the window's (scope-)time.
	BehindSeconds float64 `json:"behind_seconds"`
	BehindShare   float64 `json:"behind_share"`
	// Daily are the window's days, oldest first, every day present.
	Daily []DayFigures `json:"daily"`
}

// Quantiles are a histogram's count, median and 90th percentile (within QuantileError), and exact
// mean, in seconds.
type Quantiles struct {
	Count       uint64  `json:"count"`
	P50Seconds  float64 `json:"p50_seconds"`
	P90Seconds  float64 `json:"p90_seconds"`
	MeanSeconds float64 `json:"mean_seconds"`
}

// DayFigures are one day's figures, for the charts.
type DayFigures struct {
	Date          string  `json:"date"`
	Deploys       int     `json:"deploys"`
	Commits       int     `json:"commits"`
	Failures      int     `json:"failures"`
	Rollbacks     int     `json:"rollbacks"`
	LeadP50       float64 `json:"lead_p50_seconds"` // from acceptance; 0 when no commit went live
	BehindSeconds float64 `json:"behind_seconds"`
}

// P50 and P90 are the quantiles as durations.
func (q Quantiles) P50() time.Duration { return seconds(q.P50Seconds) }

// P90 is the 90th percentile as a duration.
func (q Quantiles) P90() time.Duration { return seconds(q.P90Seconds) }

func quantiles(h *Histogram) Quantiles {
	return Quantiles{Count: h.Count, P50Seconds: h.Quantile(0.5).Seconds(), P90Seconds: h.Quantile(0.9).Seconds(), MeanSeconds: h.Mean().Seconds()}
}

// MaxReportDays bounds a report's window: what a store keeps at most is far less
// (authority.DefaultRetention is 90 days).
const MaxReportDays = 366

// Report computes r's delivery figures over the UTC days from since's to now's, now included.
// A scope still behind at now counts its time up to now.
func (r *Rollup) Report(since, now time.Time) *Delivery {
	now = now.UTC()
	from := startOfDay(since)
	if from.After(now) {
		from = startOfDay(now)
	}
	days := int(startOfDay(now).Sub(from)/(24*time.Hour)) + 1
	if days > MaxReportDays {
		days = MaxReportDays
		from = startOfDay(now).AddDate(0, 0, 1-days)
	}
	dates := make([]string, days)
	for i := range dates {
		dates[i] = from.AddDate(0, 0, i).Format(dayLayout)
	}
	// What is still open at now: a copy of the rollup with each scope's time behind counted to now.
	open := &Rollup{Days: slices.Clone(r.Days)}
	for name, sc := range r.Scopes {
		if !sc.BehindSince.IsZero() && sc.BehindSince.Before(now) {
			open.addBehind(name, sc.BehindSince, now)
		}
	}
	names := make([]string, 0, len(r.Scopes))
	for name := range r.Scopes {
		names = append(names, name)
	}
	for _, d := range r.Days {
		if !slices.Contains(names, d.Scope) {
			names = append(names, d.Scope)
		}
	}
	slices.Sort(names)
	// The window's time, for the share behind: from its first midnight to now.
	window := now.Sub(from).Seconds()
	out := &Delivery{Environment: r.Environment, Since: from, Until: now, Days: days, Through: r.Through, QuantileError: HistogramError}
	total := newAcc(dates)
	for _, name := range names {
		acc := newAcc(dates)
		for _, d := range open.Days {
			if d.Scope == name {
				acc.add(&d)
				total.add(&d)
			}
		}
		out.Scopes = append(out.Scopes, acc.figures(name, days, window))
	}
	out.Total = total.figures("", days, window*float64(max(len(out.Scopes), 1)))
	if out.Scopes == nil {
		out.Scopes = []Figures{}
	}
	return out
}

// acc sums the days of a window.
type acc struct {
	index                               map[string]int
	daily                               []DayFigures
	lead                                []Histogram // per day, for its median
	accept, commit, restore             Histogram
	deploys, commits, failures, rollbks int
	behind                              float64
}

func newAcc(dates []string) *acc {
	a := &acc{index: make(map[string]int, len(dates)), daily: make([]DayFigures, len(dates)), lead: make([]Histogram, len(dates))}
	for i, d := range dates {
		a.index[d] = i
		a.daily[i].Date = d
	}
	return a
}

func (a *acc) add(d *Day) {
	i, ok := a.index[d.Date]
	if !ok {
		return
	}
	x := &a.daily[i]
	x.Deploys += d.Deploys
	x.Commits += d.Commits
	x.Failures += d.Failures
	x.Rollbacks += d.Rollbacks
	x.BehindSeconds += d.BehindSeconds
	a.lead[i].Merge(d.LeadFromAccept)
	a.accept.Merge(d.LeadFromAccept)
	a.commit.Merge(d.LeadFromCommit)
	a.restore.Merge(d.Restore)
	a.deploys += d.Deploys
	a.commits += d.Commits
	a.failures += d.Failures
	a.rollbks += d.Rollbacks
	a.behind += d.BehindSeconds
}

func (a *acc) figures(scope string, days int, window float64) Figures {
	f := Figures{Scope: scope, Deploys: a.deploys, Commits: a.commits, Failures: a.failures, Rollbacks: a.rollbks,
		DeploysPerDay:  float64(a.deploys) / float64(days),
		LeadFromAccept: quantiles(&a.accept), LeadFromCommit: quantiles(&a.commit), Restore: quantiles(&a.restore),
		BehindSeconds: a.behind, Daily: a.daily}
	if a.deploys > 0 {
		f.CommitsPerDeploy = float64(a.commits) / float64(a.deploys)
		f.ChangeFailureRate = float64(a.failures+a.rollbks) / float64(a.deploys)
	}
	if window > 0 {
		f.BehindShare = a.behind / window
	}
	for i := range f.Daily {
		f.Daily[i].LeadP50 = a.lead[i].Quantile(0.5).Seconds()
	}
	return f
}
