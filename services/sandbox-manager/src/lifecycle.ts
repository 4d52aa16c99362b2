/**
 * THE lifecycles of the sandbox-manager's entities: every status and the moves allowed from it.
 * Each store changes a status only through its one move function, checked against these tables;
 * the wire enums (`berth.sandboxmanager.v1.SandboxStatus`, `ImageStatus`) name the same states.
 */
import { defineLifecycle, wireEnum, type Lifecycle } from '@berth/lifecycle';
import { ImageStatus as WireImageStatus, SandboxStatus as WireSandboxStatus } from '@berth/proto';

export const sandboxLifecycle = defineLifecycle('sandbox', {
  /** Being created, or started again after a stop. */
  provisioning: { initial: true, to: ['ready', 'failed', 'stopped'] },
  ready: { to: ['stopped', 'failed'] },
  /** Could not start or died by itself; `start` tries again. */
  failed: { failed: true, to: ['provisioning'] },
  /** Files kept; `start` (or a data-plane call) resumes it. */
  stopped: { to: ['provisioning'] },
});
export type SandboxStatus = typeof sandboxLifecycle extends Lifecycle<infer S> ? S : never;
/** Statuses are lowercase in Postgres and REST, as the `langsmith/sandbox` client compares them. */
export const sandboxStatuses = wireEnum(
  WireSandboxStatus,
  sandboxLifecycle.states.map((s) => s.toUpperCase()),
);

/** A template's (or snapshot's) image: pulled once per change of image or registry. */
export const imageLifecycle = defineLifecycle('template image', {
  building: { initial: true, to: ['ready', 'failed', 'building'] },
  ready: { to: ['building'] },
  failed: { failed: true, to: ['building'] },
});
export type ImageStatus = typeof imageLifecycle extends Lifecycle<infer S> ? S : never;
export const imageStatuses = wireEnum(
  WireImageStatus,
  imageLifecycle.states.map((s) => s.toUpperCase()),
);

/** A warm-pool member; a claim removes it from the pool (it becomes the sandbox's instance). */
export const poolMemberLifecycle = defineLifecycle('pool member', {
  creating: { initial: true, to: ['ready', 'failed'] },
  ready: { to: ['failed'] },
  failed: { failed: true },
});
export type PoolMemberStatus = typeof poolMemberLifecycle extends Lifecycle<infer S> ? S : never;
