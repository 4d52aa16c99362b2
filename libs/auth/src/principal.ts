/** Who is calling: the tenant and role a credential acts with. */

export type Role = 'admin' | 'member';

/** Who is calling, as established from an API key or an access token. */
export interface Principal {
  tenantId: string;
  role: Role;
  /** An admin of the system tenant: may administer every tenant. */
  platformAdmin: boolean;
  credential:
    | { type: 'api_key'; id: string; prefix: string }
    | { type: 'access_token'; id: string; apiKeyId: string }
    /** A console session (the `berth_session` cookie), acting as the key it was made from. */
    | { type: 'session'; id: string; apiKeyId: string }
    /** A deployment's tracing credential; `id` is the deployment's. */
    | { type: 'tracing_credential'; id: string };
  /**
   * Set for a deployment's tracing credential (what its agent server traces with): it may only
   * write and read runs of this one tracing project, and call nothing else.
   */
  tracingProject?: { id: string; name: string };
}
