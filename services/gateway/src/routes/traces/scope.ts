/**
 * What a caller bound to one tracing project (Principal.tracingProject: a deployment's tracing
 * credential) may do with the trace API: write runs (all into its project), read its project's
 * runs, read its project. Everything else is refused with 403; other callers are unaffected.
 */
import type { Principal } from '@berth/auth';
import { PermissionDeniedError } from '@berth/errors';

export type BoundProject = NonNullable<Principal['tracingProject']>;

function refusal(project: BoundProject, what: string): PermissionDeniedError {
  return new PermissionDeniedError(`This credential traces into project ${JSON.stringify(project.name)} (${project.id}) only; it may not ${what}`);
}

/** The project ids a run query may cover: the bound project alone, or what the caller asked for. */
export function scopedSessionIds(auth: Principal, requested: string[]): string[] {
  const project = auth.tracingProject;
  if (!project) return requested;
  if (requested.some((id) => id.toLowerCase() !== project.id)) throw refusal(project, 'read runs of other projects');
  return [project.id];
}

/** Refuses a project operation other than reading the bound project. */
export function assertProjectAccess(auth: Principal, what: string, sessionId?: string): void {
  const project = auth.tracingProject;
  if (!project) return;
  if (what === 'read' && sessionId?.toLowerCase() === project.id) return;
  throw refusal(project, what === 'read' ? 'read other projects' : what);
}
