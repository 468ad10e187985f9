/* decode.js: an example's embedded attention maps, base64(deflate(uint8 L*H*n*n)), inflated on demand and cached.
 * Exports maps (all maps of an example and variant, value = level / 255) and headMap (one head's n*n of them). */
const {data} = app;

const mapCache = new Map();
async function maps(ti, ei, variant) {
  const key = `${ti}|${ei}|${variant}`;
  if (mapCache.has(key)) return mapCache.get(key);
  const t = data.tasks[ti], ex = t.examples[ei];
  const bin = atob(ex.maps[variant]);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  const out = new Uint8Array(await new Response(stream).arrayBuffer());
  const want = t.layers * t.heads * ex.n * ex.n;
  if (out.length !== want) throw new Error(`maps of example ${ex.idx} have ${out.length} values, expected ${want}`);
  mapCache.set(key, out);
  return out;
}
const headMap = (buf, t, ex, l, hd) => {
  const size = ex.n * ex.n, k = l * t.heads + hd;
  return buf.subarray(k * size, (k + 1) * size);
};

Object.assign(app, {maps, headMap});
