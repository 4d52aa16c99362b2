/**
 * The control-plane's environment (DATABASE_URL, GRPC_HOST, GRPC_PORT, LOG_LEVEL, BERTH_INTERNAL_TOKEN,
 * AUTH_FLOW_TTL_SECONDS, BERTH_SECRET_KEY, BERTH_ARTIFACTS_DIR, BERTH_DEPLOYER, ...): the only place
 * it reads process.env.
 */
import { envCidrList, envList, envPort, parseEnv, parseGrpcServerEnv } from '@berth/config';
import { z } from 'zod';
import type { ControlPlaneConfig, KubernetesDeployerSettings } from './config.js';

const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** `key=value,…`: labels that select pods (unset or empty: none). */
const envLabels = envList
  .refine(
    (items) =>
      items.every((item) => {
        const [key = '', value, extra] = item.split('=');
        return value !== undefined && extra === undefined && LABEL_KEY.test(key) && LABEL_VALUE.test(value);
      }),
    { message: 'a comma-separated list of Kubernetes labels such as app.kubernetes.io/component=gateway,app.kubernetes.io/instance=berth' },
  )
  .transform((items) => (items.length > 0 ? Object.fromEntries(items.map((item) => item.split('=') as [string, string])) : undefined));

const schema = z
  .object({
    /** Postgres holding the control_plane schema. */
    DATABASE_URL: z.string().min(1),
    /** Lifetime of a login flow (berth login), in seconds. */
    AUTH_FLOW_TTL_SECONDS: z.coerce.number().int().min(60).max(3600).default(600),
    /** 32 bytes, base64: encrypts deployment secrets at rest. Without it no deployments are served. */
    BERTH_SECRET_KEY: z.string().min(1).optional(),
    /** Where revisions are built. */
    BERTH_ARTIFACTS_DIR: z.string().min(1).default('/var/lib/berth/artifacts'),
    /** local (child processes) or kubernetes (in-cluster: the pod's service account). */
    BERTH_DEPLOYER: z.enum(['local', 'kubernetes']).default('local'),
    KUBERNETES_NAMESPACE: z.string().min(1).default('berth'),
    /** kubernetes: a kubeconfig file (a control plane outside the cluster); unset: the pod's service account. */
    KUBECONFIG: z.string().min(1).optional(),
    /** kubernetes: the service account of agent server pods (no token is mounted either way); unset: the namespace's default. */
    BERTH_AGENT_SERVICE_ACCOUNT: z.string().min(1).optional(),
    /** kubernetes: Secrets (comma-separated names) for pulling the agent-server image and image revisions. */
    BERTH_AGENT_IMAGE_PULL_SECRETS: envList,
    REDIS_URL: z.string().min(1).optional(),
    /** With REDIS_URL: acl (agent servers get Redis users of their own) or off (they stay on Postgres). */
    BERTH_AGENT_REDIS: z.enum(['acl', 'off']).default('acl'),
    /** Seconds a finished upload no revision uses is kept (from its start). */
    UNUSED_UPLOAD_TTL_SECONDS: z.coerce.number().int().min(1).default(3600),
    /** Most deployments one tenant may have; creating another is a 429 until one is deleted. */
    BERTH_MAX_DEPLOYMENTS_PER_TENANT: z.coerce.number().int().min(1).default(50),
    /** Most secrets one deployment may have (at most 200, the API's bound on a list); setting one more is a 429. */
    BERTH_MAX_SECRETS_PER_DEPLOYMENT: z.coerce.number().int().min(1).max(200).default(200),
    /** Logs one tenant may follow and deployments it may watch at once, through one control plane; one more is a 429. */
    BERTH_MAX_STREAMS_PER_TENANT: z.coerce.number().int().min(1).default(20),
    /** Postgres of the agent servers (defaults to DATABASE_URL). */
    AGENT_DATABASE_URL: z.string().min(1).optional(),
    /** Private CIDRs agent servers may reach (local containers: their egress proxy; kubernetes: their NetworkPolicy). */
    BERTH_DEPLOYMENT_PRIVATE_EGRESS: envCidrList,
    /** kubernetes: a NetworkPolicy per deployment (on), or none (off: the cluster enforces none, or the operator writes their own). */
    BERTH_DEPLOYMENT_NETWORK_POLICY: z.enum(['on', 'off']).default('on'),
    /** kubernetes: the namespace of the platform's pods (the gateway's, the control plane's); unset: KUBERNETES_NAMESPACE. */
    BERTH_PLATFORM_NAMESPACE: z.string().min(1).optional(),
    /** kubernetes: labels of the gateway's pods, the only pods that may connect to agent servers' API (which send them traces). */
    BERTH_GATEWAY_POD_LABELS: envLabels,
    /** kubernetes: labels of the control plane's pods, whose artifact endpoint agent pods fetch source revisions from. */
    BERTH_CONTROL_PLANE_POD_LABELS: envLabels,
    /**
     * kubernetes: the namespace of the pods that scrape agent servers' metrics (a Prometheus), with
     * BERTH_AGENT_METRICS_SCRAPER_POD_LABELS; their NetworkPolicy admits them to the metrics port (9464)
     * only. Unset: nothing reaches that port.
     */
    BERTH_AGENT_METRICS_SCRAPER_NAMESPACE: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a namespace name (a DNS label)')
      .optional(),
    /** kubernetes: labels of the pods that scrape agent servers' metrics, in BERTH_AGENT_METRICS_SCRAPER_NAMESPACE. */
    BERTH_AGENT_METRICS_SCRAPER_POD_LABELS: envLabels,
    /** The port the gateway's pods listen on (the gateway's own setting, shared by the chart's ConfigMap). */
    GATEWAY_PORT: envPort.default(8080),
    /** Memory (MiB) and CPU (cores) of a local deployment's container when its resource_spec sets none. */
    BERTH_DEPLOYMENT_MEMORY_MB: z.coerce.number().int().min(128).optional(),
    BERTH_DEPLOYMENT_CPU: z.coerce.number().positive().optional(),
    /** Most a deployment's resource_spec may ask: above is a 422. */
    BERTH_DEPLOYMENT_MAX_MEMORY_MB: z.coerce.number().int().min(128).optional(),
    BERTH_DEPLOYMENT_MAX_CPU: z.coerce.number().positive().optional(),
    /** Processes and threads per local agent server's container. */
    BERTH_DEPLOYMENT_PIDS: z.coerce.number().int().min(32).optional(),
    /** Size of a local agent server container's private /tmp, in MiB. */
    BERTH_DEPLOYMENT_TMP_MB: z.coerce.number().int().min(1).optional(),
    /** The gateway's URL as agent servers reach it (e.g. its Service): where they send their traces. Unset: no tracing. */
    BERTH_TRACING_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
    /** Private CIDRs deployed agent servers may send run webhooks to. */
    BERTH_WEBHOOK_PRIVATE_EGRESS: envCidrList,
    /** The agent-server image the kubernetes deployer runs source revisions with. */
    BERTH_AGENT_SERVER_IMAGE: z.string().min(1).optional(),
    /** The bucket built revisions are kept in for the kubernetes deployer (with BERTH_ARTIFACTS_URL). */
    BERTH_S3_BUCKET: z.string().min(1).optional(),
    BERTH_S3_REGION: z.string().min(1).default('us-east-1'),
    BERTH_S3_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
    BERTH_S3_FORCE_PATH_STYLE: z.enum(['true', 'false']).optional(),
    /** Storage credentials; unset: the SDK's other sources (a web identity, the instance's role). */
    AWS_ACCESS_KEY_ID: z.string().min(1).optional(),
    AWS_SECRET_ACCESS_KEY: z.string().min(1).optional(),
    /** Port of the artifact endpoint that agent pods fetch their revision from. */
    BERTH_ARTIFACTS_PORT: z.coerce.number().int().min(0).max(65535).default(8092),
    /** The artifact endpoint as agent pods reach it, e.g. http://berth-control-plane.berth.svc:8092. */
    BERTH_ARTIFACTS_URL: z.url({ protocol: /^https?$/ }).optional(),
    PATH: z.string().default('/usr/local/bin:/usr/bin:/bin'),
    HOME: z.string().default('/tmp'),
  })
  .refine((e) => !(e.BERTH_DEPLOYER === 'kubernetes' && e.BERTH_S3_BUCKET && !e.BERTH_ARTIFACTS_URL), {
    // Without it pods would be told the control plane's own loopback address.
    path: ['BERTH_ARTIFACTS_URL'],
    message: 'required with BERTH_DEPLOYER=kubernetes and BERTH_S3_BUCKET: the artifact endpoint as agent pods reach it',
  })
  .refine((e) => !(e.BERTH_DEPLOYER === 'kubernetes' && e.BERTH_DEPLOYMENT_NETWORK_POLICY === 'on' && !e.BERTH_GATEWAY_POD_LABELS), {
    // Without them the policy would let nothing reach the agent pods, the gateway included.
    path: ['BERTH_GATEWAY_POD_LABELS'],
    message:
      "required with BERTH_DEPLOYER=kubernetes while BERTH_DEPLOYMENT_NETWORK_POLICY is on: the labels of the gateway's pods, the only pods that may connect to agent pods (or set BERTH_DEPLOYMENT_NETWORK_POLICY=off)",
  })
  .refine((e) => !(e.BERTH_DEPLOYER === 'kubernetes' && e.BERTH_DEPLOYMENT_NETWORK_POLICY === 'on' && e.BERTH_S3_BUCKET && !e.BERTH_CONTROL_PLANE_POD_LABELS), {
    path: ['BERTH_CONTROL_PLANE_POD_LABELS'],
    message:
      "required with BERTH_DEPLOYER=kubernetes and BERTH_S3_BUCKET while BERTH_DEPLOYMENT_NETWORK_POLICY is on: the labels of the control plane's pods, whose artifact endpoint agent pods fetch source revisions from",
  })
  .refine((e) => !e.BERTH_AGENT_METRICS_SCRAPER_NAMESPACE === !e.BERTH_AGENT_METRICS_SCRAPER_POD_LABELS, {
    // A namespace alone would admit every pod in it; labels alone would be a guess at the namespace.
    path: ['BERTH_AGENT_METRICS_SCRAPER_POD_LABELS'],
    message: "set together with BERTH_AGENT_METRICS_SCRAPER_NAMESPACE: the namespace and labels of the pods that scrape agent servers' metrics",
  });

export function loadControlPlaneConfig(env: Record<string, string | undefined> = process.env): ControlPlaneConfig {
  const e = parseEnv(schema, env);
  const grpc = parseGrpcServerEnv(env);
  return {
    ...grpc,
    databaseUrl: e.DATABASE_URL,
    authFlowTtlSeconds: e.AUTH_FLOW_TTL_SECONDS,
    ...(e.BERTH_SECRET_KEY
      ? {
          deployments: {
            secretKey: e.BERTH_SECRET_KEY,
            artifactsDir: e.BERTH_ARTIFACTS_DIR,
            deployer:
              e.BERTH_DEPLOYER === 'kubernetes'
                ? {
                    kind: 'kubernetes',
                    namespace: e.KUBERNETES_NAMESPACE,
                    ...(e.KUBECONFIG ? { kubeconfig: e.KUBECONFIG } : {}),
                    ...(e.BERTH_AGENT_SERVER_IMAGE ? { agentServerImage: e.BERTH_AGENT_SERVER_IMAGE } : {}),
                    ...(e.BERTH_AGENT_SERVICE_ACCOUNT ? { serviceAccountName: e.BERTH_AGENT_SERVICE_ACCOUNT } : {}),
                    ...(e.BERTH_AGENT_IMAGE_PULL_SECRETS.length ? { imagePullSecrets: e.BERTH_AGENT_IMAGE_PULL_SECRETS } : {}),
                    ...(e.BERTH_DEPLOYMENT_NETWORK_POLICY === 'on' && e.BERTH_GATEWAY_POD_LABELS ? { networkPolicy: networkPolicySettings(e) } : {}),
                  }
                : { kind: 'local' },
            // Archives serve only agent servers that run elsewhere; the local deployer runs the build folders.
            ...(e.BERTH_DEPLOYER === 'kubernetes' && e.BERTH_S3_BUCKET
              ? {
                  archives: {
                    storage: {
                      bucket: e.BERTH_S3_BUCKET,
                      region: e.BERTH_S3_REGION,
                      ...(e.BERTH_S3_ENDPOINT ? { endpoint: e.BERTH_S3_ENDPOINT } : {}),
                      ...(e.BERTH_S3_FORCE_PATH_STYLE ? { forcePathStyle: e.BERTH_S3_FORCE_PATH_STYLE === 'true' } : {}),
                      ...(e.AWS_ACCESS_KEY_ID && e.AWS_SECRET_ACCESS_KEY
                        ? { credentials: { accessKeyId: e.AWS_ACCESS_KEY_ID, secretAccessKey: e.AWS_SECRET_ACCESS_KEY } }
                        : {}),
                    },
                    host: '0.0.0.0',
                    port: e.BERTH_ARTIFACTS_PORT,
                    ...(e.BERTH_ARTIFACTS_URL ? { url: e.BERTH_ARTIFACTS_URL } : {}),
                  },
                }
              : {}),
            ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL, agentRedis: e.BERTH_AGENT_REDIS } : {}),
            ...(e.AGENT_DATABASE_URL ? { agentDatabaseUrl: e.AGENT_DATABASE_URL } : {}),
            processEnv: { PATH: e.PATH, HOME: e.HOME },
            agentLogLevel: grpc.logLevel,
            ...(e.BERTH_TRACING_ENDPOINT ? { tracingEndpoint: e.BERTH_TRACING_ENDPOINT } : {}),
            ...(e.BERTH_WEBHOOK_PRIVATE_EGRESS.length ? { webhookPrivateEgress: e.BERTH_WEBHOOK_PRIVATE_EGRESS } : {}),
            unusedUploadTtlSeconds: e.UNUSED_UPLOAD_TTL_SECONDS,
            maxDeploymentsPerTenant: e.BERTH_MAX_DEPLOYMENTS_PER_TENANT,
            maxSecretsPerDeployment: e.BERTH_MAX_SECRETS_PER_DEPLOYMENT,
            maxStreamsPerTenant: e.BERTH_MAX_STREAMS_PER_TENANT,
            ...(e.BERTH_DEPLOYMENT_PRIVATE_EGRESS.length ? { deploymentPrivateEgress: e.BERTH_DEPLOYMENT_PRIVATE_EGRESS } : {}),
            agentLimits: {
              ...(e.BERTH_DEPLOYMENT_MEMORY_MB ? { memoryMb: e.BERTH_DEPLOYMENT_MEMORY_MB } : {}),
              ...(e.BERTH_DEPLOYMENT_CPU ? { cpu: e.BERTH_DEPLOYMENT_CPU } : {}),
              ...(e.BERTH_DEPLOYMENT_MAX_MEMORY_MB ? { maxMemoryMb: e.BERTH_DEPLOYMENT_MAX_MEMORY_MB } : {}),
              ...(e.BERTH_DEPLOYMENT_MAX_CPU ? { maxCpu: e.BERTH_DEPLOYMENT_MAX_CPU } : {}),
              ...(e.BERTH_DEPLOYMENT_PIDS ? { pids: e.BERTH_DEPLOYMENT_PIDS } : {}),
              ...(e.BERTH_DEPLOYMENT_TMP_MB ? { tmpMb: e.BERTH_DEPLOYMENT_TMP_MB } : {}),
            },
          },
        }
      : {}),
  };
}

/** The pods that agent pods' NetworkPolicy names (BERTH_PLATFORM_NAMESPACE, BERTH_*_POD_LABELS, BERTH_AGENT_METRICS_SCRAPER_*). */
function networkPolicySettings(e: z.output<typeof schema>): NonNullable<KubernetesDeployerSettings['networkPolicy']> {
  const namespace = e.BERTH_PLATFORM_NAMESPACE ?? e.KUBERNETES_NAMESPACE;
  return {
    gateway: { namespace, labels: e.BERTH_GATEWAY_POD_LABELS!, port: e.GATEWAY_PORT },
    ...(e.BERTH_CONTROL_PLANE_POD_LABELS ? { controlPlane: { namespace, labels: e.BERTH_CONTROL_PLANE_POD_LABELS, port: e.BERTH_ARTIFACTS_PORT } } : {}),
    ...(e.BERTH_AGENT_METRICS_SCRAPER_NAMESPACE && e.BERTH_AGENT_METRICS_SCRAPER_POD_LABELS
      ? { metricsScraper: { namespace: e.BERTH_AGENT_METRICS_SCRAPER_NAMESPACE, labels: e.BERTH_AGENT_METRICS_SCRAPER_POD_LABELS } }
      : {}),
  };
}
