/**
 * THE behavioural contract of the deployer port: every adapter must pass it, through the
 * `Deployer` interface only. Each adapter's test file calls {@link deployerContract} with a
 * factory of a {@link DeployerHarness}: the deployer under test plus the few adapter-specific
 * things the contract cannot know (which artifacts come up, fail or hang; how to see what runs).
 * Test support only (imports jest); not exported from the package.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { DeployFailedError, type DeployLog, type DeployedRevision, type Deployer, type RevisionArtifact, type RevisionSpec } from './deployer.js';

/** What the contract needs from one adapter's test setup. */
export interface DeployerHarness {
  deployer: Deployer;
  /**
   * Another deployer on the same target, configured like `deployer`: what a restarted control
   * plane creates. The suite closes it.
   */
  reopen(): Deployer | Promise<Deployer>;
  /**
   * An artifact whose revision comes up healthy. Called once per revision, so it may hand out a
   * fresh copy (a process adapter can return a new directory each time).
   */
  goodArtifact(): RevisionArtifact | Promise<RevisionArtifact>;
  /**
   * An artifact whose revision never becomes healthy (for a process: a project that exits at
   * start), and a piece of text that explains why, which must reach the deploy log.
   */
  failingArtifact(): { artifact: RevisionArtifact; reason: string } | Promise<{ artifact: RevisionArtifact; reason: string }>;
  /** An artifact whose revision starts but stays unhealthy without failing (for a process: one that never answers `/ok`). */
  slowArtifact(): RevisionArtifact | Promise<RevisionArtifact>;
  /** Revision ids of the deployment that run and are healthy on the target now. */
  runningRevisions(deploymentId: string): Promise<string[]>;
  /** Whether anything of the deployment is left on the target (processes, objects, files). */
  exists(deploymentId: string): Promise<boolean>;
  /**
   * Whether something healthy answers at a deployed url: a process adapter fetches `{url}/ok`; an
   * adapter whose urls are unreachable from tests checks what routes there instead.
   */
  answers(url: string): Promise<boolean>;
  /** Platform env given to every revision (e.g. `DATABASE_URL`). */
  env?: Record<string, string>;
  /**
   * How long one deploy may take on this target.
   * @default 20_000
   */
  deployTimeoutMs?: number;
  /** Releases what the harness started (the deployer itself is closed by the suite). */
  teardown?(): Promise<void>;
}

/** A deploy log that keeps its lines for assertions. */
export function collectLog(): { log: DeployLog; lines: Array<{ line: string; level: string }>; text: () => string } {
  const lines: Array<{ line: string; level: string }> = [];
  return {
    lines,
    log: (line, level = 'info') => {
      lines.push({ line, level });
    },
    text: () => lines.map((l) => l.line).join('\n'),
  };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject, but it resolved');
}

/** Registers the deployer contract tests for the adapter that `setup` provides. */
export function deployerContract(name: string, setup: () => Promise<DeployerHarness>): void {
  describe(`deployer contract: ${name}`, () => {
    let h: DeployerHarness | undefined;
    const created = new Set<string>();
    let timeout = 20_000;

    beforeAll(async () => {
      h = await setup();
      timeout = h.deployTimeoutMs ?? 20_000;
    });
    afterEach(async () => {
      // Leave nothing running between tests, whatever the test did.
      for (const id of created) await h?.deployer.remove(id, () => undefined).catch(() => undefined);
      created.clear();
    });
    afterAll(async () => {
      await h?.deployer.close();
      await h?.teardown?.();
    });

    function harness(): DeployerHarness {
      if (!h) throw new Error('deployer contract setup failed');
      return h;
    }

    function spec(artifact: RevisionArtifact, deployment?: Pick<RevisionSpec, 'deploymentId' | 'name'>): RevisionSpec {
      const deploymentId = deployment?.deploymentId ?? randomUUID();
      created.add(deploymentId);
      return {
        deploymentId,
        revisionId: randomUUID(),
        tenantId: randomUUID(),
        name: deployment?.name ?? `contract-${deploymentId.slice(0, 8)}`,
        deploymentType: 'dev',
        artifact,
        secrets: { CONTRACT_SECRET: 'not-a-real-secret' },
        env: { ...harness().env },
        resources: { replicas: 1 },
      };
    }

    it(
      'deploys a revision: resolves once it is healthy, with the url it answers at, and logs progress',
      async () => {
        const { deployer, runningRevisions, answers } = harness();
        const log = collectLog();
        const revision = spec(await harness().goodArtifact());
        const deployed = await deployer.deploy(revision, log.log);
        expect(deployed.revisionId).toBe(revision.revisionId);
        expect(deployed.url).toMatch(/^https?:\/\/[^/\s]+(\/\S*)?$/);
        expect(deployed.url.endsWith('/')).toBe(false);
        expect(log.lines.length).toBeGreaterThan(0);
        expect(await runningRevisions(revision.deploymentId)).toEqual([revision.revisionId]);
        expect(await answers(deployed.url)).toBe(true);
      },
      timeout * 2,
    );

    it(
      'deploys a new revision of the same deployment beside the old one; the old one can then be retired',
      async () => {
        const { deployer, runningRevisions, answers } = harness();
        const first = spec(await harness().goodArtifact());
        await deployer.deploy(first, collectLog().log);
        const second = { ...spec(await harness().goodArtifact(), first), secrets: { CONTRACT_SECRET: 'rotated' } };
        const deployed = await deployer.deploy(second, collectLog().log);
        expect(deployed.revisionId).toBe(second.revisionId);
        expect(await runningRevisions(first.deploymentId)).toContain(second.revisionId);
        await deployer.retire(first.deploymentId, first.revisionId, collectLog().log);
        expect(await runningRevisions(first.deploymentId)).toEqual([second.revisionId]);
        expect(await answers(deployed.url)).toBe(true);
        // Retiring what is unknown (or already retired) is a no-op.
        await deployer.retire(first.deploymentId, first.revisionId, collectLog().log);
        await deployer.retire(first.deploymentId, randomUUID(), collectLog().log);
        expect(await runningRevisions(first.deploymentId)).toEqual([second.revisionId]);
      },
      timeout * 3,
    );

    it(
      'rejects a revision that does not come up with DeployFailedError, says why in its log, and the previous revision keeps serving',
      async () => {
        const { deployer, runningRevisions, answers } = harness();
        const first = spec(await harness().goodArtifact());
        const serving = await deployer.deploy(first, collectLog().log);
        const failing = await harness().failingArtifact();
        const log = collectLog();
        const error = await rejection(deployer.deploy(spec(failing.artifact, first), log.log));
        expect(error).toBeInstanceOf(DeployFailedError);
        expect(log.text()).toContain(failing.reason);
        expect(log.lines.some((l) => l.level === 'error')).toBe(true);
        expect(await runningRevisions(first.deploymentId)).toEqual([first.revisionId]);
        expect(await answers(serving.url)).toBe(true);
      },
      timeout * 3,
    );

    it(
      'rejects a first revision that does not come up, and leaves nothing running',
      async () => {
        const { deployer, runningRevisions } = harness();
        const failing = await harness().failingArtifact();
        const log = collectLog();
        const revision = spec(failing.artifact);
        const error = await rejection(deployer.deploy(revision, log.log));
        expect(error).toBeInstanceOf(DeployFailedError);
        expect(log.text()).toContain(failing.reason);
        expect(await runningRevisions(revision.deploymentId)).toEqual([]);
      },
      timeout * 2,
    );

    it(
      'removes everything a deployment has, and a second remove is a no-op',
      async () => {
        const { deployer, exists, runningRevisions } = harness();
        const first = spec(await harness().goodArtifact());
        await deployer.deploy(first, collectLog().log);
        await deployer.deploy(spec(await harness().goodArtifact(), first), collectLog().log);
        const other = spec(await harness().goodArtifact());
        await deployer.deploy(other, collectLog().log);
        expect(await exists(first.deploymentId)).toBe(true);
        await deployer.remove(first.deploymentId, collectLog().log);
        expect(await exists(first.deploymentId)).toBe(false);
        expect(await runningRevisions(first.deploymentId)).toEqual([]);
        // Only that deployment.
        expect(await runningRevisions(other.deploymentId)).toEqual([other.revisionId]);
        await deployer.remove(first.deploymentId, collectLog().log);
      },
      timeout * 4,
    );

    it('treats remove of an unknown deployment as a no-op', async () => {
      const { deployer, exists } = harness();
      const id = randomUUID();
      await deployer.remove(id, collectLog().log);
      expect(await exists(id)).toBe(false);
    });

    it(
      'keeps its revisions serving after close() exactly when revisionsSurviveClose says so, and deploy brings one back',
      async () => {
        const { answers } = harness();
        const before = await harness().reopen();
        const revision = spec(await harness().goodArtifact());
        let deployed: DeployedRevision;
        try {
          deployed = await before.deploy(revision, collectLog().log);
          expect(await answers(deployed.url)).toBe(true);
        } finally {
          await before.close();
        }
        expect(await answers(deployed.url)).toBe(before.revisionsSurviveClose);
        // What a restarted control plane does with the revision that serves: deploy it again.
        const back = await harness().deployer.deploy(revision, collectLog().log);
        expect(await answers(back.url)).toBe(true);
      },
      timeout * 3,
    );

    it(
      'rejects an aborted deploy, promptly, and one whose signal was aborted before it started',
      async () => {
        const { deployer } = harness();
        const revision = spec(await harness().slowArtifact());
        const controller = new AbortController();
        const log = collectLog();
        const deploying = deployer.deploy(revision, log.log, controller.signal);
        let settled = false;
        void deploying.then(
          () => (settled = true),
          () => (settled = true),
        );
        // Let the deploy get under way (objects created / process started) before aborting it.
        await new Promise((resolve) => setTimeout(resolve, Math.min(500, timeout / 10)));
        expect(settled).toBe(false);
        // The slow artifact never becomes ready: only the abort can end this deploy before the
        // deployer's own readiness timeout, which would reject with an error of its own.
        const reason = new Error('replaced by a newer revision');
        controller.abort(reason);
        expect(await rejection(deploying)).toBe(reason);

        const before = new AbortController();
        before.abort();
        await rejection(deployer.deploy(spec(await harness().goodArtifact()), collectLog().log, before.signal));
      },
      timeout * 2,
    );
  });
}
