#pragma once
// Reusable validators for the field table. Each returns "" when the value is valid, else a
// description of what was expected.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "rdmad/config/field.h"

namespace rdmad::config::validators {

using Validator = std::function<std::string(const Value&)>;

Validator one_of(std::initializer_list<const char*> choices);
Validator one_of(std::vector<std::string> choices);
Validator int_range(int64_t min, int64_t max);
Validator power_of_two(int64_t min, int64_t max);  // an integer power of two in [min, max]
Validator double_range(double min, double max);     // a finite number in [min, max]
Validator positive_double();                        // a finite number > 0
Validator absolute_path(bool allow_empty = false);
// An absolute path, "credential:NAME" (a systemd credential, credential_file.h), or empty.
Validator credential_path();
Validator listen_address(bool allow_empty = false);  // host:port, [v6]:port; port 0 picks a free port
Validator uri_prefix();  // "" or scheme://... without spaces
Validator discover_target();  // "", dns:NAME or dns-srv:NAME with NAME a DNS name
Validator peer_address();  // host:port or [v6]:port with an IP literal host and a port in [1, 65535]
Validator ip_address(bool allow_empty);
Validator identifier(bool allow_empty);  // [A-Za-z0-9_.-]+
Validator label_map();                   // Prometheus label names -> values
Validator cidr(bool allow_empty);        // a.b.c.d/n or v6/n
Validator octal_mode();                  // "0660"
Validator id_list();                     // uids/gids in [0, 2^32-2]
Validator pod_uid();                     // a Kubernetes UID: 8-4-4-4-12 lower-case hex digits

// Parses "host:port" / "[v6]:port"; false on malformed input.
bool split_host_port(const std::string& s, std::string& host, int64_t& port);
bool is_ip_address(const std::string& s);
// True when IP literal `address` lies in `cidr` ("10.1.0.0/16"); false for malformed input or
// different families.
bool address_in_cidr(const std::string& address, const std::string& cidr);

}  // namespace rdmad::config::validators
