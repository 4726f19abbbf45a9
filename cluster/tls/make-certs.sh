#!/usr/bin/env bash
# Make a private certificate authority and one certificate signed by it for a Dask cluster (scheduler, workers and
# clients all present it; each side checks that the other's certificate is signed by the CA).
#
#   bash cluster/tls/make-certs.sh OUTDIR [HOST_OR_IP ...]
#
# Writes OUTDIR/ca.pem (give it to every scheduler, worker and client), OUTDIR/ca.key (keep offline: whoever has
# it can mint certificates the cluster accepts), OUTDIR/cert.pem and OUTDIR/key.pem (the cluster certificate and
# its private key; mode 600). HOST_OR_IP are the scheduler's names/addresses written into the certificate
# (default: 127.0.0.1 localhost); Dask does not check host names, but other TLS tools do.
# Needs the openssl command line tool. Certificates are valid for DAYS days (default 365).
set -euo pipefail
out="${1:?usage: make-certs.sh OUTDIR [HOST_OR_IP ...]}"
shift || true
hosts=("$@")
[ "${#hosts[@]}" -gt 0 ] || hosts=(127.0.0.1 localhost)
days="${DAYS:-365}"
mkdir -p "$out"
umask 077

san=""
for h in "${hosts[@]}"; do
  if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then san+="IP:$h,"; else san+="DNS:$h,"; fi
done
san="${san%,}"

# certificate authority
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
  -keyout "$out/ca.key" -out "$out/ca.pem" -subj "/CN=rffor dask CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

# the cluster certificate (used by scheduler, workers and clients: server and client authentication)
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$out/key.pem" -out "$out/cert.csr" -subj "/CN=rffor dask cluster" 2>/dev/null
cat > "$out/cert.ext" <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EXT
openssl x509 -req -in "$out/cert.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" -CAcreateserial \
  -days "$days" -out "$out/cert.pem" -extfile "$out/cert.ext" 2>/dev/null
rm -f "$out/cert.csr" "$out/cert.ext" "$out/ca.srl"
chmod 644 "$out/ca.pem" "$out/cert.pem"
openssl verify -CAfile "$out/ca.pem" "$out/cert.pem" >/dev/null
echo "wrote $out/ca.pem, $out/ca.key (keep secret, offline), $out/cert.pem, $out/key.pem (for: ${hosts[*]})"
