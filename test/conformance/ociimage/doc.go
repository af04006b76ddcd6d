// Package ociimage writes container images as docker-archive tarballs (the format of
// `docker save`, which `ctr images import` reads) from files on this machine, so the
// conformance cluster runs the images the e2e suite names without reaching any registry.
//
// It may import only the standard library: it is a build tool of the nested test module
// test/conformance and must stay trivially auditable.
package ociimage
