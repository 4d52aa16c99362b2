/**
 * `berth up` honours the settings its services document: the embedded platform loads every service
 * through the service's own loader, so what `berth serve --service` reads from the environment the
 * embedded platform reads too; only what the platform provides for itself is not the user's to set.
 */
import { describe, expect, it } from '@jest/globals';
import { loadExportWorkerConfig } from '@berth/export-worker';
import { embeddedServiceConfigs, type EmbeddedPlatform } from './service-config.js';

const platform: EmbeddedPlatform = {
  databaseUrl: 'postgres://berth:pw@127.0.0.1:5432/berth',
  secretKey: Buffer.alloc(32, 7).toString('base64'),
  internalToken: 't'.repeat(43),
  logLevel: 'warn',
  stateDir: '/srv/berth/.berth',
  host: '127.0.0.1',
  port: 8080,
};

describe('the embedded platform reads the services settings', () => {
  it('passes every BULK_EXPORT_* setting docs/guides/exports.md documents to the export-worker, as `serve --service export-worker` reads it', () => {
    const env = {
      BULK_EXPORT_TENANT_CONCURRENCY: '2',
      BULK_EXPORT_WORKER_CONCURRENCY: '3',
      BULK_EXPORT_TIMEOUT_HOURS: '5',
      BULK_EXPORT_MAX_RETRIES: '0',
      BULK_EXPORT_LEASE_SECONDS: '45',
      BULK_EXPORT_ALLOW_PRIVATE_ENDPOINTS: 'false',
      BULK_EXPORT_FILE_ROWS: '1000',
      TRACE_PENDING_PATCH_MAX_AGE_HOURS: '12',
    };
    const { exportWorker } = embeddedServiceConfigs(env, platform);
    expect(exportWorker.bulkExports).toEqual({
      tenantConcurrency: 2,
      workerConcurrency: 3,
      timeoutMs: 5 * 3_600_000,
      maxRetries: 0,
      leaseMs: 45_000,
      allowPrivateEndpoints: false,
      fileRows: 1000,
    });
    expect(exportWorker.pendingPatchMaxAgeHours).toBe(12);
    // The same as the service's own loader, given the platform's connection settings.
    const standalone = loadExportWorkerConfig({ ...env, DATABASE_URL: platform.databaseUrl, BERTH_SECRET_KEY: platform.secretKey });
    expect(exportWorker.bulkExports).toEqual(standalone.bulkExports);
  });

  it('keeps the embedded defaults where the user set nothing: private export endpoints allowed, builds in the state folder', () => {
    const { exportWorker, controlPlane } = embeddedServiceConfigs({}, platform);
    expect(exportWorker.bulkExports?.allowPrivateEndpoints).toBe(true);
    expect(controlPlane.deployments?.artifactsDir).toBe('/srv/berth/.berth/artifacts');
    expect(controlPlane.deployments?.deployer).toEqual({ kind: 'local' });
  });

  it('passes the control plane, gateway and sandbox-manager settings on', () => {
    const { controlPlane, gateway, sandboxManager } = embeddedServiceConfigs(
      {
        AUTH_FLOW_TTL_SECONDS: '120',
        UNUSED_UPLOAD_TTL_SECONDS: '60',
        BERTH_WEBHOOK_PRIVATE_EGRESS: '10.1.0.0/16',
        LOGIN_TOKEN_TTL_SECONDS: '3600',
        BERTH_SANDBOX_PRIVATE_EGRESS: '192.168.5.0/24',
        SANDBOX_INSECURE_REGISTRIES: '127.0.0.1:5000',
        SANDBOX_DEFAULT_IMAGE: 'registry.example/tools:1',
        BERTH_METRICS_PORT: '9464',
      },
      platform,
    );
    expect(controlPlane.authFlowTtlSeconds).toBe(120);
    // The platform's metrics listener: the gateway's, on loopback unless BERTH_METRICS_HOST says otherwise.
    expect(gateway.metrics).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(embeddedServiceConfigs({ BERTH_METRICS_PORT: '' }, platform).gateway.metrics).toBeUndefined();
    expect(controlPlane.deployments?.unusedUploadTtlSeconds).toBe(60);
    expect(controlPlane.deployments?.webhookPrivateEgress).toEqual(['10.1.0.0/16']);
    expect(gateway.loginTokenTtlSeconds).toBe(3600);
    expect(sandboxManager.sandboxes).toMatchObject({
      privateEgress: ['192.168.5.0/24'],
      insecureRegistries: ['127.0.0.1:5000'],
      defaultImage: 'registry.example/tools:1',
    });
  });

  it("gives every service the platform's own Postgres, key, token and loopback ports, whatever the environment says", () => {
    const { controlPlane, gateway, sandboxManager, exportWorker } = embeddedServiceConfigs(
      {
        DATABASE_URL: 'postgres://elsewhere/db',
        BERTH_SECRET_KEY: Buffer.alloc(32, 1).toString('base64'),
        BERTH_INTERNAL_TOKEN: 'x'.repeat(43),
        GRPC_HOST: '0.0.0.0',
        GRPC_PORT: '50051',
        GATEWAY_PORT: '9999',
        BERTH_ARTIFACTS_DIR: '/data/builds',
      },
      platform,
    );
    for (const service of [controlPlane, sandboxManager, exportWorker]) {
      expect(service).toMatchObject({
        databaseUrl: platform.databaseUrl,
        grpcHost: '127.0.0.1',
        grpcPort: 0,
        internalToken: platform.internalToken,
        logLevel: 'warn',
      });
    }
    expect(controlPlane.deployments?.secretKey).toBe(platform.secretKey);
    expect(sandboxManager.secretKey).toBe(platform.secretKey);
    expect(exportWorker.secretKey).toBe(platform.secretKey);
    expect(gateway).toMatchObject({ databaseUrl: platform.databaseUrl, host: '127.0.0.1', port: 8080, internalToken: platform.internalToken });
    // A setting the platform has only a default for is the user's.
    expect(controlPlane.deployments?.artifactsDir).toBe('/data/builds');
  });

  it('refuses a bad setting with the variable named, as the service would', () => {
    expect(() => embeddedServiceConfigs({ BULK_EXPORT_FILE_ROWS: 'many' }, platform)).toThrow(/BULK_EXPORT_FILE_ROWS/);
  });
});
