/**
 * The Berth sandbox proxy CA: the auth proxy terminates TLS to hosts that have a header rule with
 * a leaf certificate it signs, so sandboxes trust this CA (and only the proxy holds its key).
 * ECDSA P-256 through WebCrypto: keys and signatures are small and fast to make per host.
 */
import { randomBytes, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import type * as X509 from '@peculiar/x509';
// @peculiar/x509 (through tsyringe) needs the Reflect metadata API loaded first.
import 'reflect-metadata';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
const crypto = webcrypto;
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;
const CA_NAME = 'CN=Berth sandbox proxy CA, O=Berth';
const DAY_MS = 24 * 60 * 60 * 1000;
/** Leaves live two days and are replaced a day before they expire: a stolen one is soon useless. */
const LEAF_VALIDITY_MS = 2 * DAY_MS;
const LEAF_RENEW_MS = DAY_MS;
/** Certificates are back-dated a little, for sandboxes whose clock runs behind. */
const CLOCK_SKEW_MS = 60 * 60 * 1000;
const MAX_CACHED_LEAVES = 1000;

/** A certificate and its private key, PEM-encoded (what `tls.createSecureContext` takes). */
export interface PemPair {
  certPem: string;
  keyPem: string;
}

/** The CA's PEM does not parse or is not an ECDSA P-256 CA certificate and key. */
export class ProxyCaError extends Error {
  override readonly name = 'ProxyCaError';
}

let x509Module: Promise<typeof X509> | undefined;
/**
 * @peculiar/x509, loaded on first use: tsyringe checks for the Reflect metadata API as it loads,
 * and a static import would load it before `reflect-metadata` runs (jest links CommonJS imports first).
 */
function loadX509(): Promise<typeof X509> {
  x509Module ??= import('@peculiar/x509');
  return x509Module;
}

function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f; // positive, as RFC 5280 requires
  return bytes.toString('hex');
}

/** PEM ending in a newline, so that files of several (a CA bundle) can be concatenated. */
function pem(text: string): string {
  return text.endsWith('\n') ? text : `${text}\n`;
}

function keyToPem(x509: typeof X509, der: ArrayBuffer): string {
  return pem(x509.PemConverter.encode(der, 'PRIVATE KEY'));
}

export class ProxyCa {
  /** Leaves by host (with their expiry), newest last; shared while being made. */
  private readonly leaves = new Map<string, { expires: number; pair: Promise<PemPair> }>();
  private leafKeys?: Promise<CryptoKeyPair & { keyPem: string }>;

  private constructor(
    private readonly x509: typeof X509,
    private readonly cert: X509.X509Certificate,
    private readonly key: CryptoKey,
    readonly keyPem: string,
  ) {}

  /** A new CA, valid for ten years. */
  static async generate(): Promise<ProxyCa> {
    const x509 = await loadX509();
    const keys = (await crypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
    const now = Date.now();
    const cert = await x509.X509CertificateGenerator.createSelfSigned(
      {
        serialNumber: serialNumber(),
        name: CA_NAME,
        notBefore: new Date(now - CLOCK_SKEW_MS),
        notAfter: new Date(now + 3652 * DAY_MS),
        signingAlgorithm: SIGNING,
        keys,
        extensions: [
          new x509.BasicConstraintsExtension(true, 0, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
          await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
        ],
      },
      crypto,
    );
    return new ProxyCa(x509, cert, keys.privateKey, keyToPem(x509, await crypto.subtle.exportKey('pkcs8', keys.privateKey)));
  }

  /** The CA stored earlier (`certPem`, `keyPem` of a generated one). ProxyCaError when it does not parse. */
  static async fromPem(pair: PemPair): Promise<ProxyCa> {
    const x509 = await loadX509();
    try {
      const cert = new x509.X509Certificate(pair.certPem);
      const der = x509.PemConverter.decodeFirst(pair.keyPem);
      const key = await crypto.subtle.importKey('pkcs8', der, ALGORITHM, false, ['sign']);
      return new ProxyCa(x509, cert, key, pair.keyPem);
    } catch (error) {
      throw new ProxyCaError(`the sandbox proxy CA does not load (it must be an ECDSA P-256 certificate and PKCS#8 key in PEM): ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  /** The CA certificate that sandboxes trust (PEM, ending in a newline). */
  get certPem(): string {
    return pem(this.cert.toString('pem'));
  }

  /** A leaf certificate for `host` (a DNS name or an IP), signed by this CA; cached until near expiry. */
  leafFor(host: string): Promise<PemPair> {
    const now = Date.now();
    const cached = this.leaves.get(host);
    if (cached && cached.expires - now > LEAF_RENEW_MS) return cached.pair;
    const pair = this.makeLeaf(host, now);
    this.leaves.delete(host);
    this.leaves.set(host, { expires: now + LEAF_VALIDITY_MS, pair });
    // A failed signing is not cached; the next caller tries again.
    pair.catch(() => this.leaves.get(host)?.pair === pair && this.leaves.delete(host));
    if (this.leaves.size > MAX_CACHED_LEAVES) this.leaves.delete(this.leaves.keys().next().value!);
    return pair;
  }

  private async makeLeaf(host: string, now: number): Promise<PemPair> {
    const x509 = this.x509;
    // One key for every leaf of this CA: a leaf's key is only as secret as the proxy's memory anyway.
    this.leafKeys ??= (async () => {
      const keys = (await crypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
      return { ...keys, keyPem: keyToPem(x509, await crypto.subtle.exportKey('pkcs8', keys.privateKey)) };
    })();
    const keys = await this.leafKeys;
    const ip = isIP(host) !== 0;
    const cert = await x509.X509CertificateGenerator.create(
      {
        serialNumber: serialNumber(),
        // A CN is at most 64 characters; the SAN is what clients check.
        subject: host.length <= 64 ? `CN=${host.replace(/[,+"\\<>;=]/g, '\\$&')}` : 'CN=berth-proxy-leaf',
        issuer: this.cert.subject,
        notBefore: new Date(now - CLOCK_SKEW_MS),
        notAfter: new Date(now + LEAF_VALIDITY_MS),
        signingAlgorithm: SIGNING,
        publicKey: keys.publicKey,
        signingKey: this.key,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          new x509.SubjectAlternativeNameExtension([{ type: ip ? 'ip' : 'dns', value: host }]),
          await x509.AuthorityKeyIdentifierExtension.create(this.cert.publicKey, false, crypto),
          await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
        ],
      },
      crypto,
    );
    return { certPem: pem(cert.toString('pem')), keyPem: keys.keyPem };
  }
}

/**
 * The environment a sandbox needs to send HTTP(S) through the proxy at `127.0.0.1:<port>` and trust
 * its CA. `caPath` is the proxy CA alone (Node adds it to its own roots); tools that replace their
 * roots with a file (OpenSSL, Python requests, curl, git) need `bundlePath`: the image's CA bundle
 * plus the proxy CA — without one they are left alone rather than made to distrust every other CA.
 * Without `caPath` (a proxy that intercepts nothing) only the proxy variables are set.
 */
export function proxyEnvironment(options: { port: number; caPath?: string; bundlePath?: string }): Record<string, string> {
  const proxy = `http://127.0.0.1:${options.port}`;
  const noProxy = 'localhost,127.0.0.1,::1';
  return {
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
    ...(options.caPath ? { NODE_EXTRA_CA_CERTS: options.caPath } : {}),
    ...(options.bundlePath
      ? { SSL_CERT_FILE: options.bundlePath, REQUESTS_CA_BUNDLE: options.bundlePath, CURL_CA_BUNDLE: options.bundlePath, GIT_SSL_CAINFO: options.bundlePath }
      : {}),
  };
}
