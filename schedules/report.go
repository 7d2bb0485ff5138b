package schedules

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Binding is one configured value and where it bound. The caller (core) fills one per value per group.
type Binding struct {
	Group  string // "" = run-wide (Device fields, accum, clip, every-group entries)
	Name   string // the field or hyperparameter, e.g. "eta", "anchor", "threshold"
	Value  string // as bound, e.g. "1e-3", "WarmupCosine: 1e-4 at step 1", "w0"
	Source string // what won, e.g. "schedule opt.backbone.eta", "accessor LearningRate(backbone)", "preset small", "default"
	// Scheduled says the value changes per optimizer step.
	Scheduled bool
	// Unread marks a scheduled value the group's Level-2 chain does not read: the schedule does nothing
	// there. The zero value (read) is the common case.
	Unread bool
	Note   string // anything else worth a reader's eye, e.g. "ratio 0.1 of default"
}

// Report renders bindings as the plain-text binding report: a header with counts, then one section for
// run-wide values and one per group (in first-appearance order), each an aligned table of name, value,
// source and flags, rows in the order given. It computes nothing and never fails.
func Report(bindings []Binding) string {
	scheduled, unread := 0, 0
	var groups []string
	byGroup := map[string][]Binding{}
	for _, b := range bindings {
		if _, ok := byGroup[b.Group]; !ok && b.Group != "" {
			groups = append(groups, b.Group)
		}
		byGroup[b.Group] = append(byGroup[b.Group], b)
		if b.Scheduled {
			scheduled++
		}
		if b.Scheduled && b.Unread {
			unread++
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "binding report: %d values, %d scheduled", len(bindings), scheduled)
	if unread > 0 {
		fmt.Fprintf(&out, ", %d scheduled but not read by their group's chain", unread)
	}
	out.WriteString("\n")
	if rows, ok := byGroup[""]; ok {
		section(&out, "run-wide", rows)
	}
	for _, g := range groups {
		section(&out, "group "+g, byGroup[g])
	}
	return out.String()
}

func section(out *strings.Builder, title string, rows []Binding) {
	fmt.Fprintf(out, "%s\n", title)
	var table strings.Builder
	w := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	for _, b := range rows {
		var flags []string
		if b.Scheduled {
			flags = append(flags, "scheduled")
		}
		if b.Scheduled && b.Unread {
			flags = append(flags, "NOT READ by this group's chain: the schedule does nothing here")
		}
		if b.Note != "" {
			flags = append(flags, b.Note)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", b.Name, orDash(b.Value), orDash(b.Source), strings.Join(flags, "; "))
	}
	w.Flush()
	// tabwriter pads the empty last cell; trailing spaces would make the text diff noisily.
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		out.WriteString(strings.TrimRight(line, " \n"))
		if strings.HasSuffix(line, "\n") {
			out.WriteString("\n")
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
