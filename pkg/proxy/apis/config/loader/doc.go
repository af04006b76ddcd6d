// Package loader reads and writes kube-proxy configuration files for the binary:
// either version in, defaulted internal configuration out, with strict decoding
// whose errors name the field and its line; and the internal configuration out in
// a chosen version.
//
// Load does not validate; callers run validation.Validate on the result, so that
// flags applied on top are validated too.
//
// Allowed imports: k8s.io/apimachinery, go.yaml.in/yaml/v3 (for line numbers:
// sigs.k8s.io/yaml converts to JSON and loses them) and the apis/config packages
// of this module.
package loader
