/** What every part of Studio shares: where its agent server is, and the SDK client that calls it. */
import type { Client } from '@langchain/langgraph-sdk';
import { createContext, useContext } from 'react';

/** Where Studio's agent server is, and what every call carries. */
export interface StudioTarget {
  /** An absolute URL: the deployment URL on the gateway, or `berth dev`'s origin. */
  apiUrl: string;
  /** Sent with every call (the console session's X-CSRF-Token through the gateway; none for `berth dev`). */
  headers: Record<string, string>;
  /** Names the query cache's entries: one agent server's answers are not another's. */
  key: string;
}

export interface StudioContextValue {
  target: StudioTarget;
  /** The official SDK's client on the target: every call Studio makes goes through it. */
  client: Client;
}

export const StudioContext = createContext<StudioContextValue | undefined>(undefined);

export function useStudio(): StudioContextValue {
  const value = useContext(StudioContext);
  if (!value) throw new Error('useStudio outside <Studio>');
  return value;
}
