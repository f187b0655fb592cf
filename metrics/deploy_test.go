package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/turnstilelock/turnstile"
)

// The files the Collector's metrics are shipped with.
var (
	dashboardFile  = filepath.Join("..", "deploy", "grafana", "turnstile.json")
	alertsFile     = filepath.Join("..", "deploy", "prometheus", "alerts.yml")
	alertTestsFile = filepath.Join("..", "deploy", "prometheus", "alerts_test.yml")
)

// exported returns the names a default Collector exports, as PromQL sees
// them (histograms as _bucket, _sum and _count), by family.
func exported(t *testing.T) map[string]string {
	t.Helper()
	m, reg := newCollector(t)
	// Every metric gets a series.
	m.Observe(turnstile.Event{Type: turnstile.EventWaiting, Backend: "memory"})
	m.Observe(turnstile.Event{Type: turnstile.EventAcquired, Backend: "memory", Owner: "o"})
	m.ObserveQuorum("acquire", true)
	m.SetBreakerState("orders", "closed")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, mf := range mfs {
		names[mf.GetName()] = mf.GetName()
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = mf.GetName()
			}
		}
	}
	if len(mfs) != 11 {
		t.Fatalf("the Collector exports %d metrics, want the 11 it documents", len(mfs))
	}
	return names
}

var metricRE = regexp.MustCompile(`\bturnstile_[a-zA-Z0-9_]+`)

// metricsIn returns the turnstile metric names expr uses; it fails the
// test for a name the Collector does not export.
func metricsIn(t *testing.T, where, expr string, names map[string]string) []string {
	t.Helper()
	found := metricRE.FindAllString(expr, -1)
	if len(found) == 0 {
		t.Errorf("%s: %q uses no turnstile metric", where, expr)
	}
	var families []string
	for _, n := range found {
		f, ok := names[n]
		if !ok {
			t.Errorf("%s: %q uses %s, which the Collector does not export", where, expr, n)
			continue
		}
		families = append(families, f)
	}
	return families
}

type dashPanel struct {
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource *dashDatasource `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource *dashDatasource `json:"datasource"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Thresholds struct {
				Steps []struct {
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []dashPanel `json:"panels"` // a collapsed row's panels
}

type dashDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboard struct {
	UID        string      `json:"uid"`
	Title      string      `json:"title"`
	Panels     []dashPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) []dashPanel {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: dashboard without uid or title", dashboardFile)
	}
	dsVar := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatalf("%s: no Prometheus datasource variable", dashboardFile)
	}
	var panels []dashPanel
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != dsVar {
				t.Errorf("panel %q does not use the datasource variable %s", p.Title, dsVar)
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != dsVar {
					t.Errorf("a query of panel %q does not use the datasource variable %s", p.Title, dsVar)
				}
			}
			panels = append(panels, p)
		}
	}
	walk(d.Panels)
	return panels
}

// TestDashboardUsesExportedMetrics: every query of the dashboard names
// metrics the Collector exports, and every metric it exports is plotted.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	names := exported(t)
	plotted := map[string]bool{}
	for _, p := range loadDashboard(t) {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, f := range metricsIn(t, "panel "+strconv.Quote(p.Title), tg.Expr, names) {
				plotted[f] = true
			}
		}
	}
	for _, f := range names {
		if !plotted[f] {
			t.Errorf("no dashboard panel plots %s", f)
		}
	}
}

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlerts(t *testing.T) []alertRule {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
	return rules
}

var (
	// threshold splits an alert expression into the query and the level
	// it is compared with.
	threshold = regexp.MustCompile(`(?s)^(.*?)\s*(>=|<=|==|>|<)\s*([0-9.]+)\s*$`)
	// dashVar is a label matcher on a dashboard variable, which alert
	// rules do not have.
	dashVar = regexp.MustCompile(`,?\s*[a-zA-Z_]+=~"\$[a-zA-Z_]+"`)
)

// canonical strips whitespace and dashboard-variable matchers from a
// query, so that a panel's query and an alert's compare equal.
func canonical(expr string) string {
	expr = dashVar.ReplaceAllString(expr, "")
	expr = strings.Join(strings.Fields(expr), "")
	expr = strings.ReplaceAll(expr, "{,", "{")
	return strings.ReplaceAll(expr, "{}", "")
}

// TestAlertsMatchDashboard: every alert uses metrics the Collector
// exports, is plotted by a panel with the very same query, and its level
// is one of that panel's thresholds; every figure with alert levels has a
// warning and a critical rule.
func TestAlertsMatchDashboard(t *testing.T) {
	names := exported(t)
	panels := loadDashboard(t)
	severities := map[string][]string{}
	for _, r := range loadAlerts(t) {
		where := "alert " + r.Alert + " (" + r.Labels["severity"] + ")"
		metricsIn(t, where, r.Expr, names)
		severities[r.Alert] = append(severities[r.Alert], r.Labels["severity"])
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", where, s)
		}
		if r.For == "" {
			t.Errorf("%s: no for: duration", where)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s annotation", where, a)
			}
		}
		m := threshold.FindStringSubmatch(r.Expr)
		if m == nil {
			t.Errorf("%s: %q does not end in a comparison with a level", where, r.Expr)
			continue
		}
		query, level := canonical(m[1]), m[3]
		want, err := strconv.ParseFloat(level, 64)
		if err != nil {
			t.Errorf("%s: level %q: %v", where, level, err)
			continue
		}
		var panel *dashPanel
		for i, p := range panels {
			for _, tg := range p.Targets {
				if canonical(tg.Expr) == query {
					panel = &panels[i]
				}
			}
		}
		if panel == nil {
			t.Errorf("%s: no dashboard panel plots %s", where, m[1])
			continue
		}
		found := false
		for _, s := range panel.FieldConfig.Defaults.Thresholds.Steps {
			found = found || s.Value != nil && *s.Value == want
		}
		if !found {
			t.Errorf("%s: panel %q has no threshold at the alert's level %v", where, panel.Title, want)
		}
	}
	for alert, sev := range severities {
		slices.Sort(sev)
		if strings.HasPrefix(alert, "TurnstileBreaker") {
			continue // not a figure with levels: one rule
		}
		if !slices.Equal(sev, []string{"critical", "warning"}) {
			t.Errorf("alert %s has severities %v, want one critical and one warning rule", alert, sev)
		}
	}
	if len(severities) != 8 {
		t.Errorf("%d alerts, want 7 for the figures with levels and one for the breaker", len(severities))
	}
}

// TestEveryAlertIsTested: alerts_test.yml, which promtool runs, has for
// every rule a case where it fires and one where it is checked and stays
// silent.
func TestEveryAlertIsTested(t *testing.T) {
	raw, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `yaml:"exp_labels"`
				} `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", alertTestsFile, err)
	}
	if !slices.Equal(f.RuleFiles, []string{"alerts.yml"}) {
		t.Errorf("%s tests %v, want alerts.yml", alertTestsFile, f.RuleFiles)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			got := map[string]bool{}
			for _, e := range a.ExpAlerts {
				got[e.ExpLabels["severity"]] = true
				fires[a.Alertname+"/"+e.ExpLabels["severity"]] = true
			}
			for _, s := range []string{"warning", "critical"} {
				if !got[s] {
					silent[a.Alertname+"/"+s] = true
				}
			}
		}
	}
	for _, r := range loadAlerts(t) {
		id := r.Alert + "/" + r.Labels["severity"]
		if !fires[id] {
			t.Errorf("no case in %s where %s fires", alertTestsFile, id)
		}
		if !silent[id] {
			t.Errorf("no case in %s where %s stays silent", alertTestsFile, id)
		}
	}
}
