# Sourced by the dd scripts (loopback-dd.sh, cached-dd.sh): the origin they read from.
#
# nginx_origin DIR PORT writes DIR/www/big.bin (1 GiB of random bytes) unless it is
# there, and starts nginx (one worker, sendfile) serving DIR/www on 127.0.0.1:PORT, its
# pid file, config and logs under DIR. nginx_origin_stop DIR stops it.
nginx_origin() {
	local dir=$1 port=$2
	mkdir -p "$dir/www" "$dir/logs" "$dir/mnt"
	if [ ! -s "$dir/www/big.bin" ]; then
		head -c $((1 << 30)) /dev/urandom > "$dir/www/big.bin.part"
		mv "$dir/www/big.bin.part" "$dir/www/big.bin"
	fi
	cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
daemon on;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 100000;
  server { listen 127.0.0.1:$port; root $dir/www; autoindex on; }
}
CONF
	nginx -c "$dir/nginx.conf" -p "$dir"
	sleep 0.5
}

nginx_origin_stop() {
	nginx -c "$1/nginx.conf" -p "$1" -s stop
}
