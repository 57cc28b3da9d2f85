package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newRegistry builds the one registry /metrics serves: the Go runtime and
// process collectors and cs (the artifact service's Metrics, the policy
// engine). It is Spillway's own, not prometheus.DefaultRegisterer, so that
// tests may build many servers in one process. Later parts (the proxy)
// register their collectors on deps.registry before the server starts.
func newRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(cs...)
	return reg
}

// metricsHandler serves reg in the format the scraper asks for (the text
// format by default). A collector that fails is reported in the response
// and the log (promhttp.ContinueOnError): the other series are still
// served.
func metricsHandler(reg *prometheus.Registry, errLog promhttp.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      errLog,
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg, // promhttp_metric_handler_errors_total
	})
}
