// Command interop-go parses rule payloads with sentinel-golang's own ext/datasource
// converters and prints the rules they produce, for the Rust test that compares them with
// GoFlowJson, GoCircuitBreakerJson, GoSystemJson and GoHotspotJson
// (tests/tests/golang.rs).
//
// Usage: interop-go FAMILY=FILE... where FAMILY is flow, circuitbreaker, system or hotspot.
// Prints one JSON object: {FILE: {"rules": [...]}} or {FILE: {"error": "..."}}.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/alibaba/sentinel-golang/core/hotspot"
	"github.com/alibaba/sentinel-golang/ext/datasource"
)

// item is one hotspot specific item; Go keeps them in a map keyed by the typed value,
// which encoding/json cannot print.
type item struct {
	Kind      string      `json:"kind"`
	Value     interface{} `json:"value"`
	Threshold int64       `json:"threshold"`
}

func hotspotRules(rules []*hotspot.Rule) []map[string]interface{} {
	out := make([]map[string]interface{}, 0, len(rules))
	for _, r := range rules {
		items := make([]item, 0, len(r.SpecificItems))
		for k, v := range r.SpecificItems {
			items = append(items, item{Kind: fmt.Sprintf("%T", k), Value: k, Threshold: v})
		}
		sort.Slice(items, func(i, j int) bool {
			return fmt.Sprint(items[i].Value) < fmt.Sprint(items[j].Value)
		})
		out = append(out, map[string]interface{}{
			"resource":          r.Resource,
			"metricType":        int(r.MetricType),
			"controlBehavior":   int(r.ControlBehavior),
			"paramIndex":        r.ParamIndex,
			"paramKey":          r.ParamKey,
			"threshold":         r.Threshold,
			"maxQueueingTimeMs": r.MaxQueueingTimeMs,
			"burstCount":        r.BurstCount,
			"durationInSec":     r.DurationInSec,
			"paramsMaxCapacity": r.ParamsMaxCapacity,
			"specificItems":     items,
		})
	}
	return out
}

func parse(family string, src []byte) (interface{}, error) {
	switch family {
	case "flow":
		return datasource.FlowRuleJsonArrayParser(src)
	case "circuitbreaker":
		return datasource.CircuitBreakerRuleJsonArrayParser(src)
	case "system":
		return datasource.SystemRuleJsonArrayParser(src)
	case "hotspot":
		rules, err := datasource.HotSpotParamRuleJsonArrayParser(src)
		if err != nil {
			return nil, err
		}
		return hotspotRules(rules.([]*hotspot.Rule)), nil
	}
	return nil, fmt.Errorf("unknown family %q", family)
}

func main() {
	result := map[string]interface{}{}
	for _, arg := range os.Args[1:] {
		family, file, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "usage: interop-go FAMILY=FILE...\n")
			os.Exit(2)
		}
		src, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		rules, err := parse(family, src)
		if err != nil {
			result[file] = map[string]string{"error": err.Error()}
		} else {
			result[file] = map[string]interface{}{"rules": rules}
		}
	}
	out, err := json.MarshalIndent(result, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}
