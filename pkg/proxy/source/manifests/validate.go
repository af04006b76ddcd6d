package manifests

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"
)

// defaultAndValidate fills in what an API server would have defaulted for the fields
// kube-proxy reads, and rejects what an API server would reject on create: object
// metadata (names, labels, the 256 KiB annotation limit) through apimachinery's own
// validation, and for the kinds' specs the same rules as upstream's API validation for
// the fields kube-proxy reads, with the field path and value. Only what depends on
// the API server's flags (the node port range, the service CIDRs) is left out.
func defaultAndValidate(obj runtime.Object, namespaced bool) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if namespaced && m.GetNamespace() == "" {
		m.SetNamespace(v1.NamespaceDefault)
	}
	// Services become DNS labels (<service>.<namespace>.svc), so their names are
	// DNS-1035 labels; the other kinds only need DNS subdomains.
	nameFn := apivalidation.NameIsDNSSubdomain
	if _, ok := obj.(*v1.Service); ok {
		nameFn = apivalidation.NameIsDNS1035Label
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, namespaced, nameFn, field.NewPath("metadata"))

	switch o := obj.(type) {
	case *v1.Service:
		defaultService(o)
		errs = append(errs, validateService(o)...)
	case *discoveryv1.EndpointSlice:
		defaultEndpointSlice(o)
		errs = append(errs, validateEndpointSlice(o)...)
	case *v1.Node:
		errs = append(errs, validateNode(o)...)
	case *networkingv1.ServiceCIDR:
		errs = append(errs, validateServiceCIDR(o)...)
	}
	return errs
}

func defaultService(svc *v1.Service) {
	spec := &svc.Spec
	if spec.Type == "" {
		spec.Type = v1.ServiceTypeClusterIP
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = v1.ServiceAffinityNone
	}
	if spec.SessionAffinity == v1.ServiceAffinityClientIP {
		if spec.SessionAffinityConfig == nil {
			spec.SessionAffinityConfig = &v1.SessionAffinityConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP == nil {
			spec.SessionAffinityConfig.ClientIP = &v1.ClientIPConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To(v1.DefaultClientIPServiceAffinitySeconds)
		}
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if spec.Type == v1.ServiceTypeExternalName {
		return
	}
	if len(spec.ClusterIPs) == 0 && spec.ClusterIP != "" {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
	if spec.ClusterIP == "" && len(spec.ClusterIPs) > 0 {
		spec.ClusterIP = spec.ClusterIPs[0]
	}
	if len(spec.IPFamilies) == 0 && spec.ClusterIP != v1.ClusterIPNone {
		for _, ip := range spec.ClusterIPs {
			if parsed := netutils.ParseIPSloppy(ip); parsed != nil {
				if parsed.To4() != nil {
					spec.IPFamilies = append(spec.IPFamilies, v1.IPv4Protocol)
				} else {
					spec.IPFamilies = append(spec.IPFamilies, v1.IPv6Protocol)
				}
			}
		}
	}
	if spec.IPFamilyPolicy == nil {
		policy := v1.IPFamilyPolicySingleStack
		if len(spec.ClusterIPs) > 1 {
			policy = v1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &policy
	}
	if spec.InternalTrafficPolicy == nil {
		spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyCluster)
	}
	if spec.ExternalTrafficPolicy == "" && externallyAccessible(svc) {
		spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
}

// externallyAccessible reports whether traffic from outside the cluster reaches svc by
// its spec, which is when an external traffic policy applies.
func externallyAccessible(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer ||
		(svc.Spec.Type == v1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

// maxClientIPAffinitySeconds is the API server's limit for
// sessionAffinityConfig.clientIP.timeoutSeconds (one day).
const maxClientIPAffinitySeconds int32 = 86400

var supportedProtocols = sets.New(v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP)

// Limits of upstream's EndpointSlice validation.
const (
	maxSliceEndpoints = 1000
	maxSliceAddresses = 100
	maxSlicePorts     = 20000
	maxSliceHints     = 8
)

func validatePort(path *field.Path, port int32, required bool) field.ErrorList {
	if port == 0 && !required {
		return nil
	}
	if port < 1 || port > 65535 {
		return field.ErrorList{field.Invalid(path, port, "must be between 1 and 65535")}
	}
	return nil
}

func validateDNSLabel(path *field.Path, value string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

func validateQualifiedName(path *field.Path, value string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range content.IsLabelKey(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

// validateEndpointIP rejects the addresses an API server refuses as endpoints and
// external IPs: ones that can only mean this host or its link.
func validateEndpointIP(path *field.Path, ip string) field.ErrorList {
	return validateSpecialIP(path, ip, false)
}

// validateClusterIP rejects what an API server refuses as a cluster IP.
// Its validation checks only the format; the allocator then refuses any
// address outside the service CIDRs (rejectOutOfRange, when the manifests
// hold ServiceCIDRs), and no service CIDR in a working cluster holds these
// special-purpose addresses, which the kernel would not route to a Service:
// so they are refused here even when the manifests name no ServiceCIDR.
func validateClusterIP(path *field.Path, ip string) field.ErrorList {
	return validateSpecialIP(path, ip, true)
}

// validateSpecialIP refuses an invalid, unspecified, loopback or link-local address;
// any multicast one too for a cluster IP, where endpoints and external IPs are refused
// only link-local multicast (the API server's two rules differ there).
func validateSpecialIP(path *field.Path, ip string, clusterIP bool) field.ErrorList {
	parsed := netutils.ParseIPSloppy(ip)
	var msg string
	switch {
	case parsed == nil:
		msg = "must be a valid IP address"
	case parsed.IsUnspecified():
		msg = fmt.Sprintf("may not be unspecified (%v)", ip)
	case parsed.IsLoopback():
		msg = "may not be in the loopback range (127.0.0.0/8, ::1/128)"
	case clusterIP && parsed.IsMulticast():
		msg = "may not be a multicast address (224.0.0.0/4, ff00::/8)"
	case parsed.IsLinkLocalUnicast():
		msg = "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
	case !clusterIP && parsed.IsLinkLocalMulticast():
		msg = "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
	default:
		return nil
	}
	return field.ErrorList{field.Invalid(path, ip, msg)}
}

func validateProtocol(path *field.Path, proto v1.Protocol) field.ErrorList {
	if !supportedProtocols.Has(proto) {
		return field.ErrorList{field.NotSupported(path, proto, sets.List(supportedProtocols))}
	}
	return nil
}

func validateIP(path *field.Path, ip string) field.ErrorList {
	if netutils.ParseIPSloppy(ip) == nil {
		return field.ErrorList{field.Invalid(path, ip, "must be a valid IP address")}
	}
	return nil
}

func validateCIDR(path *field.Path, cidr string) field.ErrorList {
	if _, _, err := netutils.ParseCIDRSloppy(strings.TrimSpace(cidr)); err != nil {
		return field.ErrorList{field.Invalid(path, cidr, "must be a valid CIDR")}
	}
	return nil
}

func validateService(svc *v1.Service) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	specPath := field.NewPath("spec")

	switch spec.Type {
	case v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
	case v1.ServiceTypeExternalName:
		// kube-proxy ignores these; accept them so a real cluster's dump loads as is.
		return nil
	default:
		return field.ErrorList{field.NotSupported(specPath.Child("type"), spec.Type,
			[]v1.ServiceType{v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName})}
	}

	headless := spec.ClusterIP == v1.ClusterIPNone
	switch {
	case spec.ClusterIP == "":
		errs = append(errs, field.Required(specPath.Child("clusterIP"),
			"no API server allocates cluster IPs from manifests; set spec.clusterIP (or \"None\" for a headless Service)"))
	case headless:
		if spec.Type != v1.ServiceTypeClusterIP {
			errs = append(errs, field.Invalid(specPath.Child("clusterIP"), spec.ClusterIP, "may be \"None\" only for type ClusterIP"))
		}
	default:
		if len(spec.ClusterIPs) > 2 {
			errs = append(errs, field.TooMany(specPath.Child("clusterIPs"), len(spec.ClusterIPs), 2))
		}
		if spec.ClusterIPs[0] != spec.ClusterIP {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0], "must match spec.clusterIP"))
		}
		for i, ip := range spec.ClusterIPs {
			errs = append(errs, validateClusterIP(specPath.Child("clusterIPs").Index(i), ip)...)
		}
		if len(spec.ClusterIPs) == 2 {
			a, b := netutils.ParseIPSloppy(spec.ClusterIPs[0]), netutils.ParseIPSloppy(spec.ClusterIPs[1])
			if a != nil && b != nil && (a.To4() == nil) == (b.To4() == nil) {
				errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(1), spec.ClusterIPs[1], "must be of the other IP family than clusterIPs[0]"))
			}
		}
	}

	portsPath := specPath.Child("ports")
	if len(spec.Ports) == 0 && !headless {
		errs = append(errs, field.Required(portsPath, ""))
	}
	names := sets.New[string]()
	type protoPort struct {
		proto v1.Protocol
		port  int32
	}
	ports, nodePorts := sets.New[protoPort](), sets.New[protoPort]()
	for i, p := range spec.Ports {
		pp := portsPath.Index(i)
		if len(spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), "required when the Service has more than one port"))
		} else if p.Name != "" {
			errs = append(errs, validateDNSLabel(pp.Child("name"), p.Name)...)
			if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
		}
		names.Insert(p.Name)
		errs = append(errs, validatePort(pp.Child("port"), p.Port, true)...)
		errs = append(errs, validateProtocol(pp.Child("protocol"), p.Protocol)...)
		if ports.Has(protoPort{p.Protocol, p.Port}) {
			errs = append(errs, field.Duplicate(pp, fmt.Sprintf("%d/%s", p.Port, p.Protocol)))
		}
		ports.Insert(protoPort{p.Protocol, p.Port})
		if p.NodePort != 0 {
			if nodePorts.Has(protoPort{p.Protocol, p.NodePort}) {
				errs = append(errs, field.Duplicate(pp.Child("nodePort"), p.NodePort))
			}
			nodePorts.Insert(protoPort{p.Protocol, p.NodePort})
		}
		switch p.TargetPort.Type {
		case intstr.Int:
			if p.TargetPort.IntVal != p.Port {
				errs = append(errs, validatePort(pp.Child("targetPort"), p.TargetPort.IntVal, true)...)
			}
		case intstr.String:
			for _, msg := range validation.IsValidPortName(p.TargetPort.StrVal) {
				errs = append(errs, field.Invalid(pp.Child("targetPort"), p.TargetPort.StrVal, msg))
			}
		}
		if p.AppProtocol != nil {
			errs = append(errs, validateQualifiedName(pp.Child("appProtocol"), *p.AppProtocol)...)
		}
		needsNodePort := spec.Type == v1.ServiceTypeNodePort ||
			(spec.Type == v1.ServiceTypeLoadBalancer && ptr.Deref(spec.AllocateLoadBalancerNodePorts, true))
		if p.NodePort == 0 && needsNodePort {
			errs = append(errs, field.Required(pp.Child("nodePort"),
				fmt.Sprintf("no API server allocates node ports from manifests; set it for type %s", spec.Type)))
		} else if p.NodePort != 0 && spec.Type == v1.ServiceTypeClusterIP {
			errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be set for type ClusterIP"))
		} else {
			errs = append(errs, validatePort(pp.Child("nodePort"), p.NodePort, false)...)
		}
	}

	errs = append(errs, metav1validation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	for i, ip := range spec.ExternalIPs {
		errs = append(errs, validateEndpointIP(specPath.Child("externalIPs").Index(i), ip)...)
	}
	isLB := spec.Type == v1.ServiceTypeLoadBalancer
	if len(spec.LoadBalancerSourceRanges) > 0 && !isLB {
		errs = append(errs, field.Forbidden(specPath.Child("loadBalancerSourceRanges"), "may only be used when type is LoadBalancer"))
	}
	for i, cidr := range spec.LoadBalancerSourceRanges {
		errs = append(errs, validateCIDR(specPath.Child("loadBalancerSourceRanges").Index(i), cidr)...)
	}
	if spec.AllocateLoadBalancerNodePorts != nil && !isLB {
		errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when type is LoadBalancer"))
	}
	if spec.LoadBalancerClass != nil && !isLB {
		errs = append(errs, field.Forbidden(specPath.Child("loadBalancerClass"), "may only be used when type is LoadBalancer"))
	}
	etpPath := specPath.Child("externalTrafficPolicy")
	switch etp := spec.ExternalTrafficPolicy; {
	case !externallyAccessible(svc) && etp != "":
		errs = append(errs, field.Invalid(etpPath, etp, "may only be set for externally-accessible Services (NodePort, LoadBalancer, or with externalIPs)"))
	case etp != "" && etp != v1.ServiceExternalTrafficPolicyCluster && etp != v1.ServiceExternalTrafficPolicyLocal:
		errs = append(errs, field.NotSupported(etpPath, etp,
			[]v1.ServiceExternalTrafficPolicy{v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal}))
	}
	hcPath := specPath.Child("healthCheckNodePort")
	needsHealthCheck := isLB && spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	switch {
	case !needsHealthCheck && spec.HealthCheckNodePort != 0:
		errs = append(errs, field.Invalid(hcPath, spec.HealthCheckNodePort, "may only be set when type is LoadBalancer and externalTrafficPolicy is Local"))
	case needsHealthCheck && spec.HealthCheckNodePort == 0:
		errs = append(errs, field.Required(hcPath, "no API server allocates health-check node ports from manifests; set it for type LoadBalancer with externalTrafficPolicy Local"))
	case spec.HealthCheckNodePort != 0:
		errs = append(errs, validatePort(hcPath, spec.HealthCheckNodePort, true)...)
	}
	if p := spec.InternalTrafficPolicy; p != nil && *p != v1.ServiceInternalTrafficPolicyCluster && *p != v1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(specPath.Child("internalTrafficPolicy"), *p,
			[]v1.ServiceInternalTrafficPolicy{v1.ServiceInternalTrafficPolicyCluster, v1.ServiceInternalTrafficPolicyLocal}))
	}
	switch spec.SessionAffinity {
	case v1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(specPath.Child("sessionAffinityConfig"), "must not be set when sessionAffinity is None"))
		}
	case v1.ServiceAffinityClientIP:
		if t := *spec.SessionAffinityConfig.ClientIP.TimeoutSeconds; t < 1 || t > maxClientIPAffinitySeconds {
			errs = append(errs, field.Invalid(specPath.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), t,
				fmt.Sprintf("must be between 1 and %d", maxClientIPAffinitySeconds)))
		}
	default:
		errs = append(errs, field.NotSupported(specPath.Child("sessionAffinity"), spec.SessionAffinity,
			[]v1.ServiceAffinity{v1.ServiceAffinityNone, v1.ServiceAffinityClientIP}))
	}
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			errs = append(errs, validateIP(field.NewPath("status", "loadBalancer", "ingress").Index(i).Child("ip"), ing.IP)...)
		}
	}
	return errs
}

func defaultEndpointSlice(slice *discoveryv1.EndpointSlice) {
	for i := range slice.Ports {
		if slice.Ports[i].Protocol == nil {
			slice.Ports[i].Protocol = ptr.To(v1.ProtocolTCP)
		}
	}
}

func validateEndpointSlice(slice *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	if slice.Labels[discoveryv1.LabelServiceName] == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "labels").Key(discoveryv1.LabelServiceName),
			"kube-proxy ignores EndpointSlices that do not name their Service"))
	}
	var family func(string) bool
	switch slice.AddressType {
	case discoveryv1.AddressTypeIPv4:
		family = netutils.IsIPv4String
	case discoveryv1.AddressTypeIPv6:
		family = netutils.IsIPv6String
	case discoveryv1.AddressTypeFQDN:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), slice.AddressType,
			[]discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}))
	}
	if len(slice.Endpoints) > maxSliceEndpoints {
		// Checking a thousand more endpoints one by one says nothing new.
		return append(errs, field.TooMany(field.NewPath("endpoints"), len(slice.Endpoints), maxSliceEndpoints))
	}
	for i, ep := range slice.Endpoints {
		epPath := field.NewPath("endpoints").Index(i)
		ap := epPath.Child("addresses")
		switch {
		case len(ep.Addresses) == 0:
			errs = append(errs, field.Required(ap, ""))
		case len(ep.Addresses) > maxSliceAddresses:
			errs = append(errs, field.TooMany(ap, len(ep.Addresses), maxSliceAddresses))
		}
		for j, addr := range ep.Addresses {
			switch {
			case family != nil && (netutils.ParseIPSloppy(addr) == nil || !family(addr)):
				errs = append(errs, field.Invalid(ap.Index(j), addr, fmt.Sprintf("must be a valid %s address", slice.AddressType)))
			case family != nil:
				errs = append(errs, validateEndpointIP(ap.Index(j), addr)...)
			case slice.AddressType == discoveryv1.AddressTypeFQDN:
				errs = append(errs, validation.IsFullyQualifiedDomainName(ap.Index(j), addr)...)
			}
		}
		if ep.NodeName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*ep.NodeName, false) {
				errs = append(errs, field.Invalid(epPath.Child("nodeName"), *ep.NodeName, msg))
			}
		}
		if ep.Hostname != nil {
			errs = append(errs, validateDNSLabel(epPath.Child("hostname"), *ep.Hostname)...)
		}
		if ep.Hints != nil {
			if n := len(ep.Hints.ForZones); n > maxSliceHints {
				errs = append(errs, field.TooMany(epPath.Child("hints", "forZones"), n, maxSliceHints))
			}
			if n := len(ep.Hints.ForNodes); n > maxSliceHints {
				errs = append(errs, field.TooMany(epPath.Child("hints", "forNodes"), n, maxSliceHints))
			}
		}
	}
	if len(slice.Ports) > maxSlicePorts {
		return append(errs, field.TooMany(field.NewPath("ports"), len(slice.Ports), maxSlicePorts))
	}
	names := sets.New[string]()
	for i, p := range slice.Ports {
		pp := field.NewPath("ports").Index(i)
		name := ptr.Deref(p.Name, "")
		if name != "" {
			errs = append(errs, validateDNSLabel(pp.Child("name"), name)...)
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(pp.Child("name"), name))
		}
		names.Insert(name)
		if p.Port != nil {
			errs = append(errs, validatePort(pp.Child("port"), *p.Port, true)...)
		}
		errs = append(errs, validateProtocol(pp.Child("protocol"), *p.Protocol)...)
		if p.AppProtocol != nil {
			errs = append(errs, validateQualifiedName(pp.Child("appProtocol"), *p.AppProtocol)...)
		}
	}
	return errs
}

func validateNode(node *v1.Node) field.ErrorList {
	var errs field.ErrorList
	for i, a := range node.Status.Addresses {
		if a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP {
			errs = append(errs, validateIP(field.NewPath("status", "addresses").Index(i).Child("address"), a.Address)...)
		}
	}
	if node.Spec.PodCIDR != "" {
		errs = append(errs, validateCIDR(field.NewPath("spec", "podCIDR"), node.Spec.PodCIDR)...)
	}
	for i, cidr := range node.Spec.PodCIDRs {
		errs = append(errs, validateCIDR(field.NewPath("spec", "podCIDRs").Index(i), cidr)...)
	}
	return errs
}

func validateServiceCIDR(sc *networkingv1.ServiceCIDR) field.ErrorList {
	var errs field.ErrorList
	if len(sc.Spec.CIDRs) == 0 {
		errs = append(errs, field.Required(field.NewPath("spec", "cidrs"), ""))
	}
	if len(sc.Spec.CIDRs) > 2 {
		return append(errs, field.TooMany(field.NewPath("spec", "cidrs"), len(sc.Spec.CIDRs), 2))
	}
	for i, cidr := range sc.Spec.CIDRs {
		errs = append(errs, validateCIDR(field.NewPath("spec", "cidrs").Index(i), cidr)...)
	}
	if len(sc.Spec.CIDRs) == 2 && len(errs) == 0 &&
		netutils.IsIPv6CIDRString(sc.Spec.CIDRs[0]) == netutils.IsIPv6CIDRString(sc.Spec.CIDRs[1]) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "cidrs").Index(1), sc.Spec.CIDRs[1], "must be of the other IP family than cidrs[0]"))
	}
	return errs
}
