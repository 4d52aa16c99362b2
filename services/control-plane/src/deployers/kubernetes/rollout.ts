/**
 * Reading a rollout's progress the way `kubectl rollout status` does, and spotting pods of a new
 * revision that will not come up (bad image, crash loop, missing config) before the Deployment's
 * progress deadline says so.
 */
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';

export type RolloutVerdict = { state: 'done' } | { state: 'waiting'; message: string } | { state: 'failed'; reason: string };

/** Where the rollout of `generation` (what our write returned) stands. */
export function rolloutVerdict(deployment: V1Deployment, generation: number): RolloutVerdict {
  const status = deployment.status ?? {};
  if ((status.observedGeneration ?? 0) < generation) return { state: 'waiting', message: 'waiting for the rollout to start' };
  const progressing = status.conditions?.find((c) => c.type === 'Progressing');
  if (progressing?.reason === 'ProgressDeadlineExceeded' || progressing?.status === 'False') {
    return { state: 'failed', reason: `${progressing.reason ?? 'rollout failed'}: ${progressing.message ?? 'no message'}` };
  }
  const failure = status.conditions?.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
  if (failure) return { state: 'failed', reason: `${failure.reason ?? 'ReplicaFailure'}: ${failure.message ?? 'no message'}` };
  const desired = deployment.spec?.replicas ?? 1;
  const updated = status.updatedReplicas ?? 0;
  const available = status.availableReplicas ?? 0;
  const total = status.replicas ?? 0;
  if (updated < desired)
    return { state: 'waiting', message: `waiting for rollout: ${updated}/${desired} replicas updated, ${Math.min(available, updated)}/${desired} ready` };
  if (total > updated) return { state: 'waiting', message: `waiting for rollout: ${total - updated} old replicas pending termination` };
  if (available < updated) return { state: 'waiting', message: `waiting for rollout: ${available}/${desired} replicas ready` };
  return { state: 'done' };
}

/** Why a pod of the new revision is not running. */
export interface PodProblem {
  pod: string;
  container: string;
  reason: string;
  message: string | undefined;
  restarts: number;
  /** It will not fix itself: the deploy fails now instead of at the progress deadline. */
  fatal: boolean;
}

/** Waiting reasons that need a new revision, not more time. */
const FATAL_REASONS = new Set(['ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull', 'CreateContainerConfigError', 'CreateContainerError']);

/**
 * Restarts after which a crash loop counts as fatal: a server that exits on its first start or
 * two (a database still starting) gets its chance, a project that cannot import does not.
 */
export const CRASH_LOOP_RESTARTS = 3;

export function podProblems(pods: V1Pod[]): PodProblem[] {
  const problems: PodProblem[] = [];
  for (const pod of pods) {
    for (const status of [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])]) {
      const waiting = status.state?.waiting;
      const terminated = status.state?.terminated;
      const reason = waiting?.reason ?? (terminated && terminated.exitCode !== 0 ? (terminated.reason ?? 'Error') : undefined);
      if (!reason || reason === 'ContainerCreating' || reason === 'PodInitializing') continue;
      const restarts = status.restartCount ?? 0;
      problems.push({
        pod: pod.metadata?.name ?? '?',
        container: status.name,
        reason,
        message: waiting?.message ?? terminated?.message,
        restarts,
        fatal: FATAL_REASONS.has(reason) || (reason === 'CrashLoopBackOff' && restarts >= CRASH_LOOP_RESTARTS),
      });
    }
  }
  return problems;
}

/** One line about a pod problem, for the deploy log and the error. */
export function describeProblem(problem: PodProblem): string {
  const restarts = problem.restarts > 0 ? ` (restarted ${problem.restarts} times)` : '';
  return `pod ${problem.pod}: ${problem.reason}${restarts}${problem.message ? `: ${problem.message}` : ''}`;
}
