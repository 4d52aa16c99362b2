/**
 * The header the gateway adds to every request it forwards to a deployment's agent server: the
 * serving revision's credential. The agent server refuses requests without it; clients can
 * neither send nor see it.
 */
export const DEPLOYMENT_CREDENTIAL_HEADER = 'x-berth-deployment-credential';
