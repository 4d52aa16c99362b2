/**
 * API errors of the fake, each one rendered as the `Status` object a real API server returns
 * (clients branch on `code` and `reason`, and show `message`).
 */
import type { ResourceType } from './types.js';

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: Array<{ reason?: string; message: string; field?: string }>;
}

/** `metav1.Status`, the body of every failed request. */
export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** `deployments.apps` for a group, plain `secrets` for the core group. */
export function qualifiedResource(type: ResourceType): string {
  return type.group ? `${type.resource}.${type.group}` : type.resource;
}

function detailsOf(type: ResourceType, name: string): StatusDetails {
  return type.group ? { name, group: type.group, kind: type.resource } : { name, kind: type.resource };
}

export class KubeApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;

  constructor(code: number, reason: string, message: string, details?: StatusDetails) {
    super(message);
    this.name = 'KubeApiError';
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  toStatus(): KubeStatus {
    const status: KubeStatus = {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    if (this.details) status.details = this.details;
    return status;
  }

  static notFound(type: ResourceType, name: string): KubeApiError {
    return new KubeApiError(404, 'NotFound', `${qualifiedResource(type)} "${name}" not found`, detailsOf(type, name));
  }

  static alreadyExists(type: ResourceType, name: string): KubeApiError {
    return new KubeApiError(409, 'AlreadyExists', `${qualifiedResource(type)} "${name}" already exists`, detailsOf(type, name));
  }

  static conflict(type: ResourceType, name: string): KubeApiError {
    return new KubeApiError(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualifiedResource(type)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      detailsOf(type, name),
    );
  }

  static invalid(type: ResourceType, name: string, causes: Array<{ field: string; message: string }>): KubeApiError {
    const summary = causes.map((c) => `${c.field}: ${c.message}`).join(', ');
    return new KubeApiError(422, 'Invalid', `${type.kind} "${name}" is invalid: ${summary}`, {
      ...detailsOf(type, name),
      kind: type.kind,
      causes: causes.map((c) => ({ reason: 'FieldValueInvalid', message: c.message, field: c.field })),
    });
  }

  static badRequest(message: string): KubeApiError {
    return new KubeApiError(400, 'BadRequest', message);
  }

  static routeNotFound(): KubeApiError {
    return new KubeApiError(404, 'NotFound', 'the server could not find the requested resource');
  }
}
