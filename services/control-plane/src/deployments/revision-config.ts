/**
 * A revision's `source_revision_config`: what the API took (SourceRevisionConfig of the gateway's
 * deployment schemas) and shows back. Parsed with `RevisionConfig` once where it enters (a create or
 * update, store.ts reading a row); typed everywhere after.
 */
import { z } from 'zod';

/** Unknown keys are dropped: the API refuses them, so only rows of an older Berth could hold any. */
export const RevisionConfig = z.object({
  /** Path of langgraph.json inside the project (internal_source). */
  langgraph_config_path: z.string().min(1).nullish(),
  /** The container image (external_docker). */
  image_uri: z.string().min(1).nullish(),
  /** The upload the project comes from, as `uploadRef` writes it (internal_source). */
  source_tarball_path: z.string().min(1).nullish(),
});

export type RevisionConfig = z.output<typeof RevisionConfig>;

/**
 * A stored revision that lacks what its source needs, or whose config does not parse: the row was
 * not written by `Deployments` (which checks both before it stores a revision).
 */
export class RevisionConfigError extends Error {
  override readonly name = 'RevisionConfigError';
  constructor(revisionId: string, problem: string, options?: { cause?: unknown }) {
    super(`revision ${revisionId} ${problem}`, options);
  }
}

/** The config of a revision row as stored (jsonb). */
export function storedRevisionConfig(revisionId: string, value: unknown): RevisionConfig {
  const parsed = RevisionConfig.safeParse(value);
  if (!parsed.success) throw new RevisionConfigError(revisionId, 'has an unreadable source_revision_config', { cause: parsed.error });
  return parsed.data;
}

/** The langgraph.json a revision's project is loaded from. */
export function langGraphConfigPath(config: RevisionConfig): string {
  return config.langgraph_config_path ?? 'langgraph.json';
}

/** The image an external_docker revision runs. */
export function revisionImage(revision: { id: string; source_revision_config: RevisionConfig }): string {
  if (!revision.source_revision_config.image_uri) throw new RevisionConfigError(revision.id, 'has no image_uri');
  return revision.source_revision_config.image_uri;
}

/** The upload an internal_source revision is built from. */
export function revisionUpload(revision: { id: string; source_upload_id: string | null }): string {
  if (!revision.source_upload_id) throw new RevisionConfigError(revision.id, 'has no upload to build');
  return revision.source_upload_id;
}
