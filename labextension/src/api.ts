// The server extension's REST API (slm_magic/lab/handlers.py), through JupyterLab's own
// ServerConnection: the server's token and XSRF cookie go with every request.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface IMemory {
  fact_id: string;
  content: string;
  title: string | null;
  type: string;
  project: string;
  tags: string[];
  is_core: boolean;
  shared: boolean;
  author: string;
  mine: boolean;
  session_id: string | null;
  source: string | null;
  notebook: string | null;
  cell: number | null;
  created_at: string;
  updated_at: string;
  kind: string;
  score?: number;
  parts?: { [name: string]: number };
  adds?: { [name: string]: number };
  reason?: string;
  strength?: string;
  strength_words?: string;
  part_words?: { [name: string]: string };
  part_tips?: { [name: string]: string };
  matched?: { [field: string]: string[] };
}

export interface IListing {
  query: string;
  items: IMemory[];
  total: number;
  offset: number;
  limit: number;
  elapsed_ms?: number;
}

export interface IStatus {
  user: string;
  database: string;
  memories: number;
  summaries: number;
  core: number;
  sessions: number;
  feedback: number;
  phase: number;
  learning: string;
  stamp: string;
}

export interface IFacets {
  projects: string[];
  tags: string[];
  types: string[];
  authors: string[];
  team: boolean;
}

export interface IProvenance {
  notebook: string | null;
  cell: number | null;
  cell_id: string | null;
  code: string | null;
  path: string | null;
}

export interface IDetail extends IMemory {
  provenance: IProvenance | null;
}

export interface ISession {
  session_id: string;
  day: string;
  first: string;
  last: string;
  count: number;
  projects: string[];
  notebooks: string[];
  types: string[];
  summary: string | null;
  memories: { fact_id: string; title: string; created_at: string }[];
}

export class ApiError extends Error {}

export async function request<T>(path: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'slm-magic/api', path);
  const response = await ServerConnection.makeRequest(url, init, settings);
  const text = await response.text();
  let data: any = {};
  try {
    data = text ? JSON.parse(text) : {};
  } catch {
    data = { error: text };
  }
  if (!response.ok) {
    throw new ApiError(data.error || data.message || response.statusText);
  }
  return data as T;
}

export function post<T>(path: string, body: unknown): Promise<T> {
  return request<T>(path, { method: 'POST', body: JSON.stringify(body) });
}

export function query(params: { [key: string]: string | number | undefined }): string {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return parts.length ? `?${parts.join('&')}` : '';
}
