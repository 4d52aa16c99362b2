/** The sandboxes' auth proxy and egress policy (see sandbox-proxy.ts). */
export { EgressDeniedError, EgressGuard, EgressPolicyError, hostGlob, validateAccessControl, type CheckedAddress, type PatternIssue } from './egress-policy.js';
export { ProxyCa, ProxyCaError, proxyEnvironment, type PemPair } from './proxy-ca.js';
export { ProxyHost, type OpenProxy, type ProxyHostOptions, type ProxyHostPort } from './proxy-host.js';
export { SandboxProxy, type SandboxProxyOptions } from './sandbox-proxy.js';
